package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Main runs the CLI for the current process and returns its exit code.
// SIGINT and SIGTERM cancel the running command (exit 130).
func Main() int {
	ctx, stop := signalContext()
	defer stop()
	dir, _ := os.Getwd()
	return Run(ctx, Invocation{
		Args:    os.Args[1:],
		Stdin:   os.Stdin,
		Stdout:  os.Stdout,
		Stderr:  os.Stderr,
		Getenv:  os.Getenv,
		Environ: os.Environ,
		Dir:     dir,
	})
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// MainWith runs the CLI with the given arguments, streams and environment and
// returns its exit code, without touching the process's own.
func MainWith(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	return Run(context.Background(), Invocation{Args: args, Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: getenv})
}

// Run runs one invocation of the CLI: it builds the factory and the command
// tree, executes the command, prints the error once to stderr and returns the
// exit code chosen by ExitCodeOf.
func Run(ctx context.Context, inv Invocation) int {
	f := NewFactory(inv)
	return execute(ctx, f, NewCmdRoot(f), inv.Args)
}

// execute runs root with args and maps the outcome to an exit code.
func execute(ctx context.Context, f *Factory, root *cobra.Command, args []string) int {
	// Errors cobra raises before a command's own code runs (unknown command,
	// wrong arguments, missing required flags) are usage errors.
	reached := false
	markRun(root, func() { reached = true })

	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil && !reached {
		var usage *UsageError
		if !errors.As(err, &usage) {
			err = &UsageError{Err: err, Hint: fmt.Sprintf("Run '%s --help' for usage.", cmd.CommandPath())}
		}
	}
	err = explainRefusedToken(f, err)
	printError(f.IOStreams.ErrOut, err)
	return int(ExitCodeOf(err))
}

// markRun wraps the RunE of every command under c so that mark is called
// when cobra has accepted the command line and the command itself starts.
func markRun(c *cobra.Command, mark func()) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			mark()
			return run(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		markRun(sub, mark)
	}
}
