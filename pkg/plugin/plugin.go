// Package plugin holds the plugin interface of SPEC §6, the registry that
// refuses duplicates, and the permanent-error marker steps use to fail at
// once instead of retrying. For plugins that run commands (script,
// external) it holds the step environment built from nothing (StepEnv,
// SPEC §11.1) and Procs, which runs each command in its own recorded
// process group (SPEC §11.2), and the last lines a failed command printed
// (WithOutput; WithResponse for an HTTP answer), which the engine shows
// after the step's error, masked as its log (LastOutput).
//
// It imports only pkg/suggest of manent (the "did you mean" of a mistyped
// setting, the rule of every such error). Built-in plugins live under plugins/ and are
// registered by cmd/ wiring, never by init().
package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/manent-io/manent/pkg/suggest"
)

// Context is what a plugin is told about the deploy and step it acts for.
type Context struct {
	DeployID    string
	Application string
	Environment string
	Version     string
	Step        string
	// WorkDir is the deploy's work directory (removed by `cleanup`).
	WorkDir string
	// Artifact is the path of the downloaded artifact once fetched.
	Artifact string
	// With is the plugin's configuration (target.with or the custom step's with).
	With map[string]any
	// Parameters are the effective parameters of the deploy.
	Parameters map[string]any
	// Log receives lines for the deploy's log.
	Log io.Writer
	// Wave is the rollout wave this action is for ("" without a rollout);
	// WaveIndex its position (1 for the first wave); Targets are the
	// wave's targets (e.g. regions) and Percent its share for a percentage
	// rollout (SPEC §11.6).
	Wave      string
	WaveIndex int
	Targets   []string
	Percent   int
}

// Rollout is the wave an action is for as plugins receive it (SPEC §11.6):
// `rollout: {wave, index, targets, percent}`.
type Rollout struct {
	Wave    string   `json:"wave"`
	Index   int      `json:"index"`
	Targets []string `json:"targets"`
	Percent int      `json:"percent"`
}

// Rollout returns the wave of the action, nil without a rollout.
func (pc Context) Rollout() *Rollout {
	if pc.Wave == "" {
		return nil
	}
	t := pc.Targets
	if t == nil {
		t = []string{}
	}
	return &Rollout{Wave: pc.Wave, Index: pc.WaveIndex, Targets: t, Percent: pc.Percent}
}

// PercentRollout is implemented by a target plugin that can deploy a share
// of a release (rollout.percentages). A target that does not implement it,
// or answers an error, refuses a percentage rollout at submission: it would
// deploy everything at once.
type PercentRollout interface {
	// HonoursPercentages says whether the plugin, configured with `with`,
	// deploys Context.Percent of the release; the error says why not.
	HonoursPercentages(with map[string]any) error
}

// PercentValidator is implemented by a target that learns whether it
// honours a percentage rollout from the same check as Validate (an
// external plugin's validate answer declares it): admission asks it once
// for both, where Validate then HonoursPercentages would run the check
// twice.
type PercentValidator interface {
	// ValidatePercentages is Validate(with) and, when that passes,
	// HonoursPercentages(with), answered from one check, which ends when
	// ctx does (ContextValidator).
	ValidatePercentages(ctx context.Context, with map[string]any) (settings, percentages error)
}

// ContextValidator is implemented by a target or step plugin whose check
// of its settings runs a process and may take a while (an external
// plugin's validate): admission passes it the request's context, so that
// a client that leaves, or a config step that stops, ends the check at
// once and frees what it holds (a process, one of its validate slots)
// rather than letting it run to its timeout. A check ended so is no
// verdict (UndecidedError).
type ContextValidator interface {
	ValidateContext(ctx context.Context, with map[string]any) error
}

// Validate asks v whether `with` is valid: ValidateContext(ctx, with)
// when v is a ContextValidator, Validate(with) otherwise.
func Validate(ctx context.Context, v interface{ Validate(map[string]any) error }, with map[string]any) error {
	if cv, ok := v.(ContextValidator); ok {
		return cv.ValidateContext(ctx, with)
	}
	return v.Validate(with)
}

// HonoursPercentages reports why t cannot honour a percentage rollout with
// `with`, nil when it can.
func HonoursPercentages(t Target, with map[string]any) error {
	p, ok := t.(PercentRollout)
	if !ok {
		return errors.New("this plugin deploys every wave in full: it cannot deploy a percentage of a release (use rollout.waves with targets, or a plugin that honours percentages)")
	}
	return p.HonoursPercentages(with)
}

// TargetCheck is implemented by a target plugin that puts constraints on
// the names of rollout targets (e.g. one directory per target): it is
// asked, at submission, about every target of a rollout's waves.
type TargetCheck interface {
	// CheckTargets returns why targets cannot be deployed side by side,
	// nil when they can.
	CheckTargets(targets []string) error
}

// OwnerCheck is implemented by a target plugin whose target belongs to one
// application and environment once they deploy there (the local plugin's
// directory): admission refuses a deploy of another one into it. targets
// are the rollout targets of every wave (none without a rollout), each of
// which may have a place of its own (the local plugin's <dir>/<target>).
type OwnerCheck interface {
	CheckOwner(application, environment string, with map[string]any, targets []string) error
}

// EnvironmentCheck is implemented by a target plugin whose settings name
// a place the server's configuration keeps to some environments (the
// kubernetes plugin's kubeconfig files): admission, the dry run and the
// config step refuse a deploy of another environment naming it. envWith is
// the environment configuration's own `with` for this plugin (nil: none),
// whose choices are the operator's and allowed.
type EnvironmentCheck interface {
	CheckEnvironment(environment string, with, envWith map[string]any) error
}

// Gate is implemented by a target plugin that has its own health gate
// between rollout waves (e.g. waiting for the wave's workloads on the
// cluster). Without it the gate runs the post-test check.
type Gate interface {
	HealthGate(ctx context.Context, pc Context) (Result, error)
}

// Result is what an action reports, recorded as the step output.
type Result map[string]any

// Target deploys a release and can compensate it (SPEC §6). Every method
// must be idempotent: a step interrupted by a crash runs again.
type Target interface {
	// Validate checks the plugin's configuration (`with`): a refusal, or
	// an UndecidedError when the check gave no verdict.
	Validate(with map[string]any) error
	// Live reports what is live now, so a checkpoint can return to it.
	Live(ctx context.Context, pc Context) (json.RawMessage, error)
	Deploy(ctx context.Context, pc Context) (Result, error)
	Activate(ctx context.Context, pc Context) (Result, error)
	Health(ctx context.Context, pc Context) (Result, error)
	// RollbackDeploy and RollbackActivation return to the checkpointed state.
	RollbackDeploy(ctx context.Context, pc Context, checkpoint json.RawMessage) (Result, error)
	RollbackActivation(ctx context.Context, pc Context, checkpoint json.RawMessage) (Result, error)
}

// Runner runs a custom step (`steps[].plugin`).
type Runner interface {
	Validate(with map[string]any) error
	Run(ctx context.Context, pc Context) (Result, error)
}

// Registry maps plugin names to implementations.
type Registry struct {
	mu      sync.RWMutex
	targets map[string]Target
	runners map[string]Runner
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{targets: map[string]Target{}, runners: map[string]Runner{}}
}

// RegisterTarget adds a target plugin; a duplicate name is an error.
func (r *Registry) RegisterTarget(name string, t Target) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.targets[name]; ok {
		return fmt.Errorf("plugin %q registered twice as a target", name)
	}
	r.targets[name] = t
	return nil
}

// RegisterRunner adds a step plugin; a duplicate name is an error.
func (r *Registry) RegisterRunner(name string, s Runner) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.runners[name]; ok {
		return fmt.Errorf("plugin %q registered twice as a step runner", name)
	}
	r.runners[name] = s
	return nil
}

// Target returns the target plugin called name.
func (r *Registry) Target(name string) (Target, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.targets[name]
	if !ok {
		return nil, Permanent(fmt.Errorf("unknown target plugin %q (%sknown: %s)", name, didYouMean(name, r.targets), known(r.targets)))
	}
	return t, nil
}

// Runner returns the step plugin called name.
func (r *Registry) Runner(name string) (Runner, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.runners[name]
	if !ok {
		return nil, Permanent(fmt.Errorf("unknown step plugin %q (%sknown: %s)", name, didYouMean(name, r.runners), known(r.runners)))
	}
	return s, nil
}

// didYouMean is `did you mean "x"? ` when a name of m is close to name (a
// typo), else "".
func didYouMean[V any](name string, m map[string]V) string {
	if close := suggest.Closest(name, keys(m)); close != "" {
		return fmt.Sprintf("did you mean %q? ", close)
	}
	return ""
}

// known lists the names of m for an error message, sorted.
func known[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(keys(m), ", ")
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// PermanentError marks an error that retrying cannot fix (a 4xx, a bad
// parameter, a digest mismatch): the step fails at once.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as permanent (nil stays nil).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err is marked permanent.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// UndecidedError says that a plugin could not decide whether its settings
// are valid: its check gave no verdict (an external plugin's validate
// timed out, found none of its slots free, crashed or broke the
// protocol). It is no refusal of the settings — the fault is the server's
// and may pass: admission answers 503 with Retry-After and stores
// nothing, and the config step retries. A refusal is any other error of
// Validate.
type UndecidedError struct {
	Err error
	// RetryAfter is how long to wait before asking again.
	RetryAfter time.Duration
}

func (e *UndecidedError) Error() string { return e.Err.Error() }
func (e *UndecidedError) Unwrap() error { return e.Err }

// Undecided marks err as a check that could not decide (nil stays nil).
// A permanent mark inside err is dropped: asking again may answer.
func Undecided(err error, retryAfter time.Duration) error {
	if err == nil {
		return nil
	}
	if IsPermanent(err) {
		err = errors.New(err.Error())
	}
	return &UndecidedError{Err: err, RetryAfter: retryAfter}
}

// AsUndecided returns the UndecidedError in err's chain, or nil.
func AsUndecided(err error) *UndecidedError {
	var u *UndecidedError
	if errors.As(err, &u) {
		return u
	}
	return nil
}
