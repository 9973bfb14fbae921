package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Sibling binaries. `manent agent` needs client-go and `manent policy test`
// needs OPA; linked into manent they would make every command pay for them
// (their package initialisers run at every start: about 4x the memory and
// twice the start-up time of `manent status`). So manent defines these
// commands (flags, checks, help) but runs them in a sibling binary, the way
// git and kubectl run their plugins: manent-agent and manent-policy, built
// from cmd/manent-agent and cmd/manent-policy, shipped in the same archive
// and image. Each sibling is the same command tree under the same name
// (pkg/agentcmd, pkg/policycmd call SiblingMain), so messages, help and exit
// codes are those of `manent agent` and `manent policy test`.
const (
	AgentBinary  = "manent-agent"
	PolicyBinary = "manent-policy"
)

// siblingStopDelay is how long a sibling has to exit after manent passed it
// SIGTERM (manent itself was interrupted) before it is killed.
const siblingStopDelay = 30 * time.Second

// siblingEnv are the variables a sibling gets when the invocation has no
// Environ (tests and embedders that give only Getenv): those manent and its
// siblings read.
var siblingEnv = []string{
	"PATH", "HOME", "XDG_CONFIG_HOME", "TERM", "NO_COLOR", "MANENT_FORCE_TTY",
	"MANENT_SERVER", "MANENT_TOKEN", "MANENT_CONTEXT", "MANENT_CONFIG", "MANENT_REQUEST_TIMEOUT", "MANENT_DATA_DIR",
	"MANENT_CLUSTER", "KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
	"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR",
}

// findSibling returns the path of the sibling binary name: next to the
// running executable (symbolic links resolved) first, then on the
// invocation's PATH.
func findSibling(name string, getenv func(string) string) (string, error) {
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dirs = append(dirs, filepath.Dir(exe))
	}
	dirs = append(dirs, filepath.SplitList(getenv("PATH"))...)
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		// LookPath of a path with a separator checks just that file:
		// it exists, is not a directory and is executable.
		if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			return p, nil
		}
	}
	where := "on PATH"
	if len(dirs) > 0 && dirs[0] != "" {
		where = "next to manent (" + dirs[0] + ") nor on PATH"
	}
	return "", &UsageError{
		Err: fmt.Errorf("%s is not installed: this command runs the %s binary, found neither %s", name, name, where),
		Hint: fmt.Sprintf("%s ships with manent in the release archive and the image; "+
			"from a checkout, 'go build -o bin/ ./cmd/...' builds it beside bin/manent.", name),
	}
}

// siblingArgs are the command-line arguments that give the sibling the same
// command: the subcommand path below the sibling's top command, every flag
// the user set (the command's and the global ones, as --name=value), then
// the positional arguments after "--".
func siblingArgs(cmd *cobra.Command, sub []string, args []string) []string {
	out := append([]string{}, sub...)
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				out = append(out, "--"+fl.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+fl.Name+"="+fl.Value.String())
	})
	if len(args) > 0 {
		out = append(out, "--")
		out = append(out, args...)
	}
	return out
}

// runSibling runs cmd in the sibling binary name with the invocation's
// streams, working directory and environment, and returns its exit code as a
// *SilentError (the sibling printed its own messages). sub is the path of
// cmd below the sibling's top command ("test" for `policy test`). When ctx
// ends (SIGINT/SIGTERM), the sibling gets SIGTERM and its exit code is
// still the one returned: the agent exits 0 on SIGTERM.
func runSibling(ctx context.Context, f *Factory, cmd *cobra.Command, name string, sub, args []string) error {
	path, err := findSibling(name, f.Getenv)
	if err != nil {
		return err
	}
	c := exec.Command(path, siblingArgs(cmd, sub, args)...)
	c.Stdin = f.IOStreams.In
	c.Stdout = f.IOStreams.RawOut
	c.Stderr = f.IOStreams.errRaw
	c.Dir = f.WorkDir
	c.Env = f.environ()
	// Streams that are not files are copied through pipes; once the
	// sibling has exited, the copies get a bounded time to finish (an
	// input that never ends must not hold manent).
	c.WaitDelay = 5 * time.Second
	defer tieToParent(c)()
	if err := c.Start(); err != nil {
		return fmt.Errorf("run %s: %w", name, err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		_ = c.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(siblingStopDelay):
			_ = c.Process.Kill()
		}
	}()
	err = c.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit):
		code := exit.ExitCode()
		if code < 0 { // killed by a signal
			code = int(ExitInterrupted)
		}
		return &SilentError{Code: ExitCode(code)}
	default:
		return fmt.Errorf("run %s: %w", name, err)
	}
}

// environ is the environment a sibling gets: the invocation's Environ, or
// else the variables of siblingEnv read through Getenv.
func (f *Factory) environ() []string {
	if f.Environ != nil {
		return f.Environ()
	}
	var env []string
	for _, k := range siblingEnv {
		if v := f.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// SiblingMain is the main of a sibling binary (manent-agent,
// manent-policy): it runs the command build returns as the only command
// under a root named manent, with the global flags, so that
// `manent-agent --cluster x` is `manent agent --cluster x` and says so in
// its messages. It returns the exit code.
func SiblingMain(build func(f *Factory) *cobra.Command) int {
	ctx, stop := signalContext()
	defer stop()
	dir, _ := os.Getwd()
	return SiblingRun(ctx, Invocation{
		Args: os.Args[1:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Getenv: os.Getenv, Environ: os.Environ, Dir: dir,
	}, build)
}

// SiblingRun runs one invocation of a sibling binary (see SiblingMain);
// tests drive siblings in-process with it.
func SiblingRun(ctx context.Context, inv Invocation, build func(f *Factory) *cobra.Command) int {
	f := NewFactory(inv)
	sub := build(f)
	root := &cobra.Command{
		Use:           "manent <command>",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(f.IOStreams.In)
	root.SetOut(f.IOStreams.Out)
	root.SetErr(f.IOStreams.ErrOut)
	root.CompletionOptions.DisableDefaultCmd = true
	root.PersistentFlags().AddFlagSet(f.GlobalFlags())
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(sub)
	inv.Args = append([]string{sub.Name()}, inv.Args...)
	return execute(ctx, f, root, inv.Args)
}
