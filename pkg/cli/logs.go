package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// LogsOptions are the inputs of `manent logs`.
type LogsOptions struct {
	IO           *IOStreams
	Client       func() (*api.Client, error)
	Exporter     *Exporter
	PollInterval time.Duration

	ID      string
	Follow  bool
	Timeout time.Duration
}

// NewCmdLogs builds `manent logs`.
func NewCmdLogs(f *Factory, runF func(*LogsOptions) error) *cobra.Command {
	opts := &LogsOptions{IO: f.IOStreams, Client: f.Client, PollInterval: f.PollInterval}
	cmd := &cobra.Command{
		Use:   "logs <id> [-f]",
		Short: "Print the log of a deploy",
		Long: `Print the log of a deploy, one line per entry: time (UTC), step, text.

With -f the command keeps printing new lines until the deploy is final and
then exits like 'manent wait': 0 if it ended SUCCESS, 1 otherwise (with the
reason on stderr), 3 if --timeout elapsed first. With -o json each line is
printed as one JSON object per line.`,
		Example: `  manent logs dpl_01JABCDEF
  manent logs -f dpl_01JABCDEF
  manent logs dpl_01JABCDEF -o json | jq -r '.lines[] | select(.step == "deploy") | .text'`,
		Args: exactArgs(1, "deploy id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			opts.Exporter = f.Exporter()
			if opts.Timeout < 0 {
				return usageErrorf("--timeout must not be negative")
			}
			if opts.Timeout > 0 && !opts.Follow {
				return usageErrorf("--timeout needs -f/--follow")
			}
			if runF != nil {
				return runF(opts)
			}
			return logsRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Follow, "follow", "f", false, "keep printing new lines until the deploy is final")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 0, "with -f, give up after this long (exit 3); 0 waits forever")
	return cmd
}

func logsRun(ctx context.Context, opts *LogsOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	if !opts.Follow {
		res, err := client.Logs(ctx, opts.ID)
		if err != nil {
			return err
		}
		if res.Lines == nil {
			res.Lines = []manent.LogLine{}
		}
		if opts.Exporter != nil {
			return opts.Exporter.Write(opts.IO.Out, res)
		}
		for _, l := range res.Lines {
			printLogLine(opts.IO, l)
		}
		return nil
	}
	return followLogs(ctx, client, opts)
}

// followLogs polls the log every PollInterval, printing the lines not yet
// printed (by Seq), until the deploy is final; then it exits like `wait`.
func followLogs(ctx context.Context, client *api.Client, opts *LogsOptions) error {
	parent := ctx
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	var (
		lastSeq  int64
		printed  bool
		state    manent.State
		sawLive  bool
		finalRun bool
	)
	timedOut := func(err error) error {
		if opts.Timeout > 0 && parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &TimeoutError{ID: opts.ID, State: state, After: opts.Timeout}
		}
		return err
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return timedOut(ctx.Err())
		case <-timer.C:
		}
		res, err := client.Logs(ctx, opts.ID)
		if err != nil {
			return timedOut(err)
		}
		for _, l := range res.Lines {
			if printed && l.Seq <= lastSeq {
				continue
			}
			if err := writeLogLine(opts, l); err != nil {
				return err
			}
			lastSeq, printed = l.Seq, true
		}
		state = res.State
		if state == "" {
			d, err := client.Deployment(ctx, opts.ID)
			if err != nil {
				return timedOut(err)
			}
			state = d.State
		}
		switch {
		case !state.Final():
			sawLive = true
		case sawLive && !finalRun:
			// The deploy just ended: read once more for lines written
			// while it did, then stop.
			finalRun = true
		default:
			// The deploy itself (its error and rollback) decides the exit
			// code; poll it in case it lags behind the log's state.
			d, err := watchDeploy(ctx, client, opts.ID, opts.PollInterval, 0, nil)
			if err != nil {
				return timedOut(err)
			}
			return outcome(d)
		}
		timer.Reset(opts.PollInterval)
		if finalRun {
			timer.Reset(0)
		}
	}
}

func writeLogLine(opts *LogsOptions, l manent.LogLine) error {
	if opts.Exporter != nil {
		return opts.Exporter.WriteStream(opts.IO.Out, l)
	}
	printLogLine(opts.IO, l)
	return nil
}

// printLogLine prints `TIME [step] text`.
func printLogLine(s *IOStreams, l manent.LogLine) {
	ts := s.Faint(l.Time.UTC().Format(logTimeLayout))
	if l.Step == "" {
		fmt.Fprintf(s.Out, "%s %s\n", ts, l.Text)
		return
	}
	fmt.Fprintf(s.Out, "%s %s %s\n", ts, s.Bold("["+l.Step+"]"), l.Text)
}
