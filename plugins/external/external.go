// Package external runs external plugins (SPEC §6): an executable named
// manent-plugin-<name>, found on `plugins.path`, that speaks the JSON
// protocol manent.plugin/v1 (docs/plugins.md). Each action is one run of
// the executable: one JSON request on stdin, one JSON response on stdout;
// stderr lines go to the deploy log.
//
// An external plugin is both a target (plugin.Target) and a custom-step
// runner (plugin.Runner). Like a script, it runs in its own process group
// (plugin.Procs) with the environment of plugin.StepEnv (SPEC §11.1). A
// with.env that would change what its executable runs (LD_PRELOAD, PATH,
// an exported bash function, a MANENT_* variable: plugin.CheckProgramEnv)
// is refused before the executable starts, at validate and at every
// action: the descriptor chooses the plugin's settings, not its program.
//
// It imports pkg/plugin only.
package external

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/manent-io/manent/pkg/plugin"
)

// Protocol is the protocol version a request carries.
const Protocol = "manent.plugin/v1"

// Prefix starts the file name of an external plugin.
const Prefix = "manent-plugin-"

// Actions of the protocol.
const (
	ActionValidate           = "validate"
	ActionLive               = "live"
	ActionDeploy             = "deploy"
	ActionActivate           = "activate"
	ActionHealth             = "health"
	ActionRollbackDeploy     = "rollback:deploy"
	ActionRollbackActivation = "rollback:activation"
	ActionRun                = "run"
)

// Defaults.
const (
	// DefaultTimeout bounds one action when the context has no earlier deadline.
	DefaultTimeout = 10 * time.Minute
	// ValidateTimeout bounds a validate action (run at submission, which
	// waits for it), waiting for a slot included, unless
	// Plugin.ValidateTimeout says otherwise.
	ValidateTimeout = 10 * time.Second
	// MaxValidateTimeout is the longest validate timeout the server's
	// configuration may set (plugins.validate_timeout): a submission, and
	// one of MaxValidations slots, wait for it.
	MaxValidateTimeout = 5 * time.Minute
	// MaxValidations bounds the validate actions of one plugin running at
	// once: a flood of submissions naming a plugin whose validate hangs
	// starts no more processes than this.
	MaxValidations = 4
	// MaxResponse bounds stdout.
	MaxResponse = 4 << 20
)

// Request is what a plugin reads on stdin.
type Request struct {
	Protocol string         `json:"protocol"`
	Action   string         `json:"action"`
	Context  RequestContext `json:"context"`
	With     map[string]any `json:"with"`
	// Checkpoint is what `live` answered before the deploy; only for the
	// rollback actions.
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
}

// RequestContext is the deploy and step the action is for (plugin.Context).
type RequestContext struct {
	DeployID    string         `json:"deploy_id"`
	Application string         `json:"application"`
	Environment string         `json:"environment"`
	Version     string         `json:"version"`
	Step        string         `json:"step"`
	WorkDir     string         `json:"workdir"`
	Artifact    string         `json:"artifact"`
	Parameters  map[string]any `json:"parameters,omitempty"`
	// Rollout is the wave the action is for, absent without a rollout
	// (SPEC §11.6): {wave, index, targets, percent}.
	Rollout *plugin.Rollout `json:"rollout,omitempty"`
}

// Response is what a plugin writes on stdout.
type Response struct {
	OK bool `json:"ok"`
	// Output is recorded as the step's output; for `live` it is the
	// checkpoint.
	Output map[string]any `json:"output,omitempty"`
	// Error says what went wrong when OK is false.
	Error string `json:"error,omitempty"`
	// Permanent says retrying cannot help: the step fails at once.
	Permanent bool `json:"permanent,omitempty"`
	// Settings, in a refused validate, says what is wrong with each
	// setting of `with`: admission reports each at its own place.
	Settings []SettingProblem `json:"settings,omitempty"`
}

// SettingProblem is one refused setting of a validate answer.
type SettingProblem struct {
	// Path is the setting's place below `with`, a JSON pointer ("timeout",
	// "headers/X-A"; a leading "/" is allowed); "" for `with` itself.
	Path string `json:"path"`
	// Error says what is wrong with it.
	Error string `json:"error"`
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// Plugin is one external plugin executable.
type Plugin struct {
	// Name is the plugin name, without the prefix.
	Name string
	// Path is the executable.
	Path string
	// Timeout bounds one action; 0 means DefaultTimeout. A context deadline
	// that comes earlier wins.
	Timeout time.Duration
	// PassEnv names the server's environment variables the executable also
	// gets (plugins.pass_env); see plugin.StepEnv for the rest.
	PassEnv []string
	// Procs runs the executable in its own process group and records it
	// (nil: not recorded).
	Procs *plugin.Procs
	// ValidateTimeout bounds a validate action, waiting for one of the
	// MaxValidations slots included; 0 means ValidateTimeout.
	ValidateTimeout time.Duration

	slotsOnce sync.Once
	slots     chan struct{}
}

// Discover finds the external plugins in dirs: executable files named
// manent-plugin-<name>, <name> as an application name ([a-z0-9][a-z0-9-]*).
// Like PATH, the first directory that has a name wins, and a directory that
// does not exist is skipped; any other failure to read one is an error.
func Discover(dirs []string) (map[string]*Plugin, error) {
	out := map[string]*Plugin{}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("plugins.path: %w", err)
		}
		for _, e := range entries {
			name, ok := strings.CutPrefix(e.Name(), Prefix)
			if !ok || !namePattern.MatchString(name) || out[name] != nil {
				continue
			}
			path := filepath.Join(dir, e.Name())
			st, err := os.Stat(path) // follows symlinks
			if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
				continue
			}
			abs, err := filepath.Abs(path)
			if err != nil {
				return nil, fmt.Errorf("plugins.path: %w", err)
			}
			out[name] = &Plugin{Name: name, Path: abs}
		}
	}
	return out, nil
}

// Register adds every plugin to reg as a target and as a step runner, in
// name order. A name already taken (a built-in) is an error.
func Register(reg *plugin.Registry, plugins map[string]*Plugin) error {
	names := make([]string, 0, len(plugins))
	for n := range plugins {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	for _, n := range names {
		p := plugins[n]
		errs = append(errs, reg.RegisterTarget(n, p), reg.RegisterRunner(n, p))
	}
	return errors.Join(errs...)
}

// Validate asks the plugin to check `with`.
func (p *Plugin) Validate(with map[string]any) error {
	return p.ValidateContext(context.Background(), with)
}

// ValidateContext is Validate ended when ctx is (plugin.ContextValidator):
// a submission whose client leaves stops the validate process at once,
// which frees its slot.
func (p *Plugin) ValidateContext(ctx context.Context, with map[string]any) error {
	_, err := p.validate(ctx, with)
	return err
}

// HonoursPercentages asks the plugin (a validate action) whether it
// deploys a share of a release: its answer's output must declare
// `"capabilities": {"percentages": true}`.
func (p *Plugin) HonoursPercentages(with map[string]any) error {
	out, err := p.validate(context.Background(), with)
	if err != nil {
		return err
	}
	return p.percentages(out)
}

// ValidatePercentages is Validate and HonoursPercentages from one validate
// action (plugin.PercentValidator).
func (p *Plugin) ValidatePercentages(ctx context.Context, with map[string]any) (settings, percentages error) {
	out, err := p.validate(ctx, with)
	if err != nil {
		return err, nil
	}
	return nil, p.percentages(out)
}

// percentages says why a validate answer (its output) does not declare the
// capability "percentages", nil when it does.
func (p *Plugin) percentages(out plugin.Result) error {
	if caps, _ := out["capabilities"].(map[string]any); caps["percentages"] == true {
		return nil
	}
	return fmt.Errorf("plugin %s does not declare the capability \"percentages\" (its validate answer has no output.capabilities.percentages: true): it would deploy every wave in full", p.Name)
}

// validate runs the validate action within the validate timeout, in one
// of the plugin's MaxValidations slots. A submission waits for it, so an
// answer that does not come — no slot in time, no answer in time (its
// process group killed), a crash or no valid response — is no verdict on
// the settings: a plugin.UndecidedError saying which plugin it was and
// what to do (admission answers 503, the config step retries). Only a
// response is a verdict. It ends when parent does (the submission's
// client left): no verdict either.
func (p *Plugin) validate(parent context.Context, with map[string]any) (plugin.Result, error) {
	if err := plugin.CheckProgramEnv(with); err != nil {
		// A verdict on the settings, before the executable runs with them.
		return nil, err
	}
	timeout := cmp.Or(p.ValidateTimeout, ValidateTimeout)
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	p.slotsOnce.Do(func() { p.slots = make(chan struct{}, MaxValidations) })
	stopped := func() error {
		return plugin.Undecided(fmt.Errorf("plugin %s: validate stopped before it answered: %w (the request ended)", p.Name, context.Cause(parent)), timeout)
	}
	select {
	case p.slots <- struct{}{}:
		defer func() { <-p.slots }()
	case <-ctx.Done():
		if parent.Err() != nil && ctx.Err() == context.Canceled {
			return nil, stopped()
		}
		return nil, plugin.Undecided(fmt.Errorf("plugin %s: validate: %d validations of this plugin were already running and none ended within %s: its executable (%s%s) is slow or hung; try again in a moment, and if it persists ask the server's operators to fix or remove the plugin", p.Name, MaxValidations, timeout, Prefix, p.Name), timeout)
	}
	out, answered, err := p.exchange(ctx, ActionValidate, plugin.Context{With: with}, nil)
	switch {
	case err != nil && errors.Is(err, plugin.ErrOutputHeld):
		return nil, plugin.Undecided(fmt.Errorf("plugin %s: validate could not be read to its end within %s: %w; its executable (%s%s) must not leave processes holding its stdout: try again in a moment, and if it persists ask the server's operators to fix or remove the plugin", p.Name, timeout, plugin.ErrOutputHeld, Prefix, p.Name), timeout)
	case err != nil && ctx.Err() == context.Canceled && parent.Err() != nil:
		return nil, stopped()
	case err != nil && ctx.Err() == context.DeadlineExceeded:
		return nil, plugin.Undecided(fmt.Errorf("plugin %s: validate did not answer within %s and was stopped: its executable (%s%s) is slow or hung; try again in a moment, and if it persists ask the server's operators to fix or remove the plugin", p.Name, timeout, Prefix, p.Name), timeout)
	case err != nil && !answered:
		return nil, plugin.Undecided(fmt.Errorf("%w: its executable (%s%s) gave no verdict on the settings; try again in a moment, and if it persists ask the server's operators to fix or remove the plugin", err, Prefix, p.Name), timeout)
	}
	return out, err
}

// Live asks what is live now; the response's output is the checkpoint.
func (p *Plugin) Live(ctx context.Context, pc plugin.Context) (json.RawMessage, error) {
	out, err := p.do(ctx, ActionLive, pc, nil)
	if err != nil {
		return nil, err
	}
	if out == nil {
		return json.RawMessage(`{}`), nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, plugin.Permanent(fmt.Errorf("plugin %s: live output: %w", p.Name, err))
	}
	return b, nil
}

// Deploy runs the deploy action.
func (p *Plugin) Deploy(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	return p.do(ctx, ActionDeploy, pc, nil)
}

// Activate runs the activate action.
func (p *Plugin) Activate(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	return p.do(ctx, ActionActivate, pc, nil)
}

// Health runs the health action.
func (p *Plugin) Health(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	return p.do(ctx, ActionHealth, pc, nil)
}

// RollbackDeploy runs rollback:deploy with the checkpoint.
func (p *Plugin) RollbackDeploy(ctx context.Context, pc plugin.Context, checkpoint json.RawMessage) (plugin.Result, error) {
	return p.do(ctx, ActionRollbackDeploy, pc, checkpoint)
}

// RollbackActivation runs rollback:activation with the checkpoint.
func (p *Plugin) RollbackActivation(ctx context.Context, pc plugin.Context, checkpoint json.RawMessage) (plugin.Result, error) {
	return p.do(ctx, ActionRollbackActivation, pc, checkpoint)
}

// Run runs the run action (a custom step).
func (p *Plugin) Run(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	return p.do(ctx, ActionRun, pc, nil)
}

// do runs the executable once for action and interprets its answer:
//   - a response with ok: its output;
//   - a response without ok: its error, permanent if it says so;
//   - no response and exit code ≠ 0, or a timeout: a retryable error;
//   - exit code 0 without a valid response: a permanent protocol error;
//   - an executable that cannot be started: a permanent error.
func (p *Plugin) do(ctx context.Context, action string, pc plugin.Context, checkpoint json.RawMessage) (plugin.Result, error) {
	out, _, err := p.exchange(ctx, action, pc, checkpoint)
	return out, err
}

// exchange is do, and says whether the plugin answered with a response
// (a verdict, whatever it says).
func (p *Plugin) exchange(ctx context.Context, action string, pc plugin.Context, checkpoint json.RawMessage) (_ plugin.Result, answered bool, _ error) {
	if err := plugin.CheckProgramEnv(pc.With); err != nil {
		// Admitted before the check, or given by the environment
		// configuration: the executable does not start with it.
		return nil, false, plugin.Permanent(fmt.Errorf("plugin %s: %w", p.Name, err))
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	with := pc.With
	if with == nil {
		with = map[string]any{}
	}
	req := Request{
		Protocol: Protocol, Action: action, With: with, Checkpoint: checkpoint,
		Context: RequestContext{
			DeployID: pc.DeployID, Application: pc.Application, Environment: pc.Environment, Version: pc.Version,
			Step: pc.Step, WorkDir: pc.WorkDir, Artifact: pc.Artifact, Parameters: pc.Parameters,
			Rollout: pc.Rollout(),
		},
	}
	in, err := json.Marshal(req)
	if err != nil {
		return nil, false, plugin.Permanent(fmt.Errorf("plugin %s: encode request: %w", p.Name, err))
	}
	cmd := exec.Command(p.Path)
	if st, err := os.Stat(pc.WorkDir); err == nil && st.IsDir() {
		cmd.Dir = pc.WorkDir
	}
	cmd.Env = plugin.StepEnv(pc, p.PassEnv, "MANENT_PLUGIN_PROTOCOL="+Protocol, "MANENT_ACTION="+action)
	cmd.Stdin = bytes.NewReader(in)
	stdout := &limitedBuffer{max: MaxResponse}
	cmd.Stdout = stdout
	logw := plugin.NewLineWriter(pc.Log)
	cmd.Stderr = logw
	run := p.Procs.Run
	if action == ActionValidate {
		// A submission waits for it, and its output is kept in memory:
		// read no longer than the validate's time.
		run = p.Procs.RunBounded
	}
	runErr := run(ctx, pc, cmd)
	logw.Flush()

	resp, parseErr := parseResponse(stdout)
	if errors.Is(runErr, plugin.ErrOutputHeld) {
		return nil, false, fmt.Errorf("plugin %s: %s: %w", p.Name, action, runErr)
	}
	if ctx.Err() == context.DeadlineExceeded {
		return nil, false, plugin.WithOutput(fmt.Errorf("plugin %s: %s timed out after %s", p.Name, action, timeout), logw.LastLines())
	}
	if parseErr == nil {
		if resp.OK {
			return plugin.Result(resp.Output), true, nil
		}
		msg := resp.Error
		if msg == "" {
			msg = "failed without saying why"
		}
		err := fmt.Errorf("plugin %s: %s: %s", p.Name, action, msg)
		if action == ActionValidate && len(resp.Settings) > 0 {
			errs := make([]error, 0, len(resp.Settings))
			for _, sp := range resp.Settings {
				why := sp.Error
				if why == "" {
					why = msg
				}
				errs = append(errs, plugin.Settingf(strings.TrimPrefix(sp.Path, "/"), "%s", why))
			}
			err = fmt.Errorf("plugin %s: %s: %w", p.Name, action, errors.Join(errs...))
		}
		if resp.Permanent {
			return plugin.Result(resp.Output), true, plugin.Permanent(err)
		}
		return plugin.Result(resp.Output), true, err
	}
	// What it printed instead of a response, when it printed something:
	// the first bytes, escaped (a traceback, a shell's error).
	printed := ""
	if out := bytes.TrimSpace(stdout.buf.Bytes()); len(out) > 0 {
		printed = fmt.Sprintf(" (%v; stdout began %s)", parseErr, strconv.QuoteToASCII(string(out[:min(len(out), 200)])))
	}
	var ee *exec.ExitError
	switch {
	case errors.As(runErr, &ee) && ee.ExitCode() < 0:
		return nil, false, plugin.WithOutput(fmt.Errorf("plugin %s: %s was killed (%s) without a response%s", p.Name, action, ee.ProcessState, printed), logw.LastLines())
	case errors.As(runErr, &ee):
		// The last lines of its stderr say why (a traceback's last line).
		return nil, false, plugin.WithOutput(fmt.Errorf("plugin %s: %s exited with status %d without a response%s", p.Name, action, ee.ExitCode(), printed), logw.LastLines())
	case runErr != nil && ctx.Err() != nil:
		return nil, false, fmt.Errorf("plugin %s: %s: %w", p.Name, action, ctx.Err())
	case runErr != nil:
		return nil, false, plugin.Permanent(fmt.Errorf("plugin %s: %w", p.Name, runErr))
	}
	return nil, false, plugin.Permanent(fmt.Errorf("plugin %s: %s: %w", p.Name, action, parseErr))
}

// parseResponse reads the one JSON object stdout must hold.
func parseResponse(stdout *limitedBuffer) (Response, error) {
	var r Response
	if stdout.overflow {
		return r, fmt.Errorf("response larger than %d bytes", MaxResponse)
	}
	data := bytes.TrimSpace(stdout.buf.Bytes())
	if len(data) == 0 {
		return r, errors.New("no response on stdout")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("stdout is not a JSON response: %w", err)
	}
	// One object and nothing after it: json.Decoder.More does not see a
	// stray "}" or "]".
	if rest := data[dec.InputOffset():]; len(bytes.TrimSpace(rest)) > 0 {
		rest = bytes.TrimSpace(rest)
		return r, fmt.Errorf("stdout holds more than one JSON response: %s follows the response", strconv.QuoteToASCII(string(rest[:min(len(rest), 40)])))
	}
	if data[0] != '{' {
		// null: the one value that decodes into a struct and is none.
		return r, fmt.Errorf("stdout is not a JSON response: %s is not a JSON object", strconv.QuoteToASCII(string(data[:min(len(data), 40)])))
	}
	// ok is required: an answer of another protocol, or a typo, is not
	// read as a failure that says nothing and is retried.
	var has struct {
		OK *bool `json:"ok"`
	}
	if json.Unmarshal(data, &has) != nil || has.OK == nil {
		return r, errors.New(`the response has no "ok" field: a response of ` + Protocol + ` is {"ok": true, "output": {…}} or {"ok": false, "error": "…"}`)
	}
	return r, nil
}

// limitedBuffer keeps the first max bytes written.
type limitedBuffer struct {
	buf      bytes.Buffer
	max      int
	overflow bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		b.overflow = true
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}
