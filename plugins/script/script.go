// Package script is the `script` plugin (SPEC §6): it runs a command in the
// deploy's work directory, in its own process group (plugin.Procs), with
// the environment of plugin.StepEnv (SPEC §11.1) and the full context as
// JSON on stdin; its output goes to the deploy log and an exit code other
// than 0 fails the step, whose error then ends with the last lines the
// command printed (plugin.WithOutput).
//
// As a custom step it runs `with.command`; as a target, `with.command` runs
// for every action with MANENT_STEP telling which (deploy, activation,
// post-test, rollback:deploy, rollback:activation).
//
// Within a rollout wave (SPEC §11.6) the command also gets
// MANENT_ROLLOUT_WAVE (the wave's name), MANENT_ROLLOUT_INDEX (1 for the
// first wave), MANENT_ROLLOUT_TARGETS (comma-separated) and
// MANENT_ROLLOUT_PERCENT (0 for a wave of targets), and `rollout` on stdin.
// A script target honours rollout.percentages: the command is the one that
// deploys MANENT_ROLLOUT_PERCENT % of the release.
//
// It imports pkg/plugin only.
package script

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/plugin"
)

// DefaultTimeout bounds a command without `with.timeout`.
const DefaultTimeout = 10 * time.Minute

// Options configure the script plugin.
type Options struct {
	// PassEnv names the server's environment variables a command also gets
	// (plugins.pass_env); see plugin.StepEnv for the rest.
	PassEnv []string
	// Procs runs the commands in their own process groups and records
	// them (nil: not recorded).
	Procs *plugin.Procs
}

// Plugin is the script plugin.
type Plugin struct{ o Options }

// New returns the script plugin.
func New(o Options) *Plugin { return &Plugin{o: o} }

type config struct {
	Command []string
	Timeout time.Duration
}

func parse(with map[string]any) (config, error) {
	c := config{Timeout: DefaultTimeout}
	s := plugin.ReadSettings(with, "command", "env", "timeout")
	if cmd, ok := with["command"].(string); ok {
		s.Fail("command", "with.command must be a list of strings (argv), such as [\"sh\", \"-c\", %q]", cmd)
	} else if s.Require("command") && s.Strings("command", false, &c.Command) && len(c.Command) == 0 {
		s.Fail("command", "with.command must be a non-empty list of strings (argv)")
	}
	for i, arg := range c.Command {
		if strings.ContainsRune(arg, 0) {
			// No program argument can hold one: exec refuses it.
			s.Fail(plugin.SettingPath("command", strconv.Itoa(i)), "with.command[%d] holds a NUL character", i)
		}
	}
	s.Duration("timeout", &c.Timeout)
	// with.env is applied by plugin.StepEnv; checked here.
	_, err := plugin.WithEnv(with)
	s.Add(err)
	if err := s.Err(); err != nil {
		return c, fmt.Errorf("script: %w", err)
	}
	return c, nil
}

// Validate checks `with`.
func (p *Plugin) Validate(with map[string]any) error {
	_, err := parse(with)
	return err
}

// Run runs the command.
func (p *Plugin) Run(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	c, err := parse(pc.With)
	if err != nil {
		return nil, plugin.Permanent(err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	cmd := exec.Command(c.Command[0], c.Command[1:]...)
	cmd.Dir = pc.WorkDir
	cmd.Env = plugin.StepEnv(pc, p.o.PassEnv, rolloutEnv(pc)...)
	doc := map[string]any{
		"deploy_id": pc.DeployID, "application": pc.Application, "environment": pc.Environment,
		"version": pc.Version, "step": pc.Step, "artifact": pc.Artifact, "workdir": pc.WorkDir,
		"with": pc.With, "parameters": pc.Parameters,
	}
	if ro := pc.Rollout(); ro != nil {
		doc["rollout"] = ro
	}
	stdin, _ := json.Marshal(doc)
	cmd.Stdin = bytes.NewReader(stdin)
	lw := plugin.NewLineWriter(pc.Log)
	cmd.Stdout = lw
	cmd.Stderr = lw
	start := time.Now()
	err = p.o.Procs.Run(ctx, pc, cmd)
	lw.Flush()
	res := plugin.Result{"command": c.Command[0], "duration_ms": time.Since(start).Milliseconds()}
	// A failure carries the last lines the command printed (stdout and
	// stderr are one stream, in the order written): the step's error
	// shows them masked (plugin.LastOutput).
	if ctx.Err() == context.DeadlineExceeded {
		return res, plugin.WithOutput(fmt.Errorf("script %s timed out after %s", c.Command[0], c.Timeout), lw.LastLines())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res["exit_code"] = ee.ExitCode()
		if ee.ExitCode() < 0 {
			// Killed by a signal: say which, not "status -1".
			return res, plugin.WithOutput(fmt.Errorf("script %s was killed (%s)", c.Command[0], ee.ProcessState), lw.LastLines())
		}
		return res, plugin.WithOutput(fmt.Errorf("script %s exited with status %d", c.Command[0], ee.ExitCode()), lw.LastLines())
	}
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || os.IsNotExist(err) {
			return res, plugin.Permanent(fmt.Errorf("script: %w", err))
		}
		return res, fmt.Errorf("script: %w", err)
	}
	res["exit_code"] = 0
	return res, nil
}

// rolloutEnv is the wave a command deploys (SPEC §11.6), for StepEnv.
func rolloutEnv(pc plugin.Context) []string {
	ro := pc.Rollout()
	if ro == nil {
		return nil
	}
	return []string{
		"MANENT_ROLLOUT_WAVE=" + ro.Wave,
		"MANENT_ROLLOUT_INDEX=" + strconv.Itoa(ro.Index),
		"MANENT_ROLLOUT_TARGETS=" + strings.Join(ro.Targets, ","),
		"MANENT_ROLLOUT_PERCENT=" + strconv.Itoa(ro.Percent),
	}
}

// HonoursPercentages: the command receives MANENT_ROLLOUT_PERCENT and is
// the one that deploys that share (docs/rollout.md).
func (p *Plugin) HonoursPercentages(with map[string]any) error {
	_, err := parse(with)
	return err
}

// Live has nothing to report for a script target.
func (p *Plugin) Live(context.Context, plugin.Context) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}

// Deploy runs the command with MANENT_STEP=deploy.
func (p *Plugin) Deploy(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	return p.Run(ctx, pc)
}

// Activate runs the command with MANENT_STEP=activation.
func (p *Plugin) Activate(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	return p.Run(ctx, pc)
}

// Health runs the command with MANENT_STEP=post-test.
func (p *Plugin) Health(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	return p.Run(ctx, pc)
}

// RollbackDeploy runs the command with MANENT_STEP=rollback:deploy.
func (p *Plugin) RollbackDeploy(ctx context.Context, pc plugin.Context, _ json.RawMessage) (plugin.Result, error) {
	return p.Run(ctx, pc)
}

// RollbackActivation runs the command with MANENT_STEP=rollback:activation.
func (p *Plugin) RollbackActivation(ctx context.Context, pc plugin.Context, _ json.RawMessage) (plugin.Result, error) {
	return p.Run(ctx, pc)
}
