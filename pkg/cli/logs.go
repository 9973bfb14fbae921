package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// LogsOptions are the inputs of `manent logs`.
type LogsOptions struct {
	IO           *IOStreams
	Client       func() (*api.Client, error)
	StreamHTTP   func() *http.Client
	Exporter     *Exporter
	PollInterval time.Duration
	// FollowGrace is how long a server that stopped answering is asked
	// again while following (DefaultFollowGrace when 0).
	FollowGrace time.Duration

	ID      string
	Follow  bool
	Timeout time.Duration
	// Raw prints each line's text exactly as the step wrote it.
	Raw bool
	// Quiet hides the progress of -f on stderr.
	Quiet bool

	status *statusLine
}

// NewCmdLogs builds `manent logs`.
func NewCmdLogs(f *Factory, runF func(*LogsOptions) error) *cobra.Command {
	opts := &LogsOptions{IO: f.IOStreams, Client: f.Client, StreamHTTP: f.StreamHTTP, PollInterval: f.PollInterval}
	cmd := &cobra.Command{
		Use:   "logs <id> [-f]",
		Short: "Print the log of a deploy",
		Long: `Print the log of a deploy, one line per entry: time (UTC), step, text.

With -f the command follows the log as Server-Sent Events until the deploy
is final, printing each line once (a dropped connection is resumed where it
stopped), then exits like 'manent wait': 0 if the deploy ended SUCCESS, 1
otherwise (with the reason on stderr), 3 if --timeout elapsed first, 4 if
the server stays unreachable for --follow-grace (default 30s;
MANENT_FOLLOW_GRACE) (a server restart is waited out: the
stream resumes after the last line printed; the deploy goes on on the
server either way) or answers with a server error; Ctrl-C stops the
following, not the deploy (exit 130: 'manent cancel <id>' does). With
-o json each line is printed as one JSON object per line.

An old deploy's log may have been removed by the server's retention
(retention.logs, or retention.deploys on its way to remove the deploy):
the command then says so on stderr, with when the removal began, and
prints what is left, if anything (-o json: logs_removed_from); so does
-f, and 'manent status' shows it as Log.

Log text is what the deploy's steps wrote, so it is not trusted: control
characters and escape sequences are printed visibly (ESC as "\x1b", CR as
"\x0d") and can never drive the terminal. --raw prints each line's text
exactly as it was written, and nothing else (no time, no step): only for
output you trust, or to replay a step's output to a file.`,
		Example: `  manent logs dpl_01JABCDEF
  manent logs -f dpl_01JABCDEF
  manent logs --raw dpl_01JABCDEF > deploy.log
  manent logs dpl_01JABCDEF -o json | jq -r '.lines[] | select(.step == "deploy") | .text'`,
		Args: idArg("deploy id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			opts.Exporter = f.Exporter()
			opts.FollowGrace = f.followGrace()
			if opts.Timeout < 0 {
				return usageErrorf("--timeout must not be negative")
			}
			if opts.Timeout > 0 && !opts.Follow {
				return usageErrorf("--timeout needs -f/--follow")
			}
			if opts.Raw && opts.Exporter != nil {
				return usageErrorf("--raw prints plain text: it cannot be combined with -o json or yaml")
			}
			if runF != nil {
				return runF(opts)
			}
			return unknownDeploy(logsRun(cmd.Context(), opts))
		},
	}
	cmd.Flags().BoolVarP(&opts.Follow, "follow", "f", false, "keep printing new lines until the deploy is final")
	cmd.Flags().BoolVarP(&opts.Quiet, "quiet", "q", false, "with -f: no progress on stderr (state, step, elapsed time)")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 0, "with -f, give up after this long (exit 3); 0 waits forever")
	cmd.Flags().BoolVar(&opts.Raw, "raw", false, "print each line's text exactly as written, escape sequences included (trusted output only)")
	return cmd
}

func logsRun(ctx context.Context, opts *LogsOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	if !opts.Follow {
		if opts.Exporter != nil {
			res, err := client.Logs(ctx, opts.ID)
			if err != nil {
				return err
			}
			if res.Lines == nil {
				res.Lines = []manent.LogLine{}
			}
			return opts.Exporter.Write(opts.IO.Out, res)
		}
		// Page by page (the server sends at most api.MaxLogPage lines at
		// once): a long log is printed as it comes, not held whole.
		said := false
		return client.EachLogsPage(ctx, opts.ID, func(page *api.LogsResult) error {
			if page.LogsRemovedFrom != nil && !said {
				said = true
				fmt.Fprintf(opts.IO.ErrOut, "the log of %s was removed by retention (retention.logs or retention.deploys) from %s: the lines below, if any, are what is left\n",
					opts.ID, page.LogsRemovedFrom.UTC().Format(time.RFC3339))
			}
			for _, l := range page.Lines {
				if err := writeLogLine(opts, l); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return followLogs(ctx, client, opts)
}

// followLogs streams the deploy's log (GET …/logs?follow=true, Server-Sent
// Events) from its first line until the deploy is final, printing each line
// once; a dropped connection is resumed with Last-Event-ID. It then exits
// like `wait`: the deploy's outcome decides the exit code.
func followLogs(ctx context.Context, client *api.Client, opts *LogsOptions) (err error) {
	parent := ctx
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	timedOut := func(err error) error {
		if opts.Timeout > 0 && parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			state := manent.State("")
			qctx, cancel := context.WithTimeout(parent, 5*time.Second)
			defer cancel()
			if d, derr := client.Deployment(qctx, opts.ID); derr == nil {
				state = d.State
			}
			return &TimeoutError{ID: opts.ID, State: state, After: opts.Timeout}
		}
		return err
	}
	// A plain request first: an unknown deploy, a refused token or a
	// server that is down get their exit codes at once.
	first, err := client.Deployment(ctx, opts.ID)
	if err != nil {
		return timedOut(err)
	}
	if first.LogsRemovedFrom != nil {
		// Retention marks final deploys only: said once, before the stream
		// replays what is left (an empty stream read as a silent deploy).
		fmt.Fprintf(opts.IO.ErrOut, "deploy %s: log lines removed by retention from %s (retention.logs or retention.deploys): the lines below, if any, are what is left\n",
			safeText(opts.ID), first.LogsRemovedFrom.UTC().Format(time.RFC3339))
	}
	// Registered first, so said after the status line is erased.
	defer func() { sayGoesOn(opts.IO, err, opts.ID) }()
	// The deploy's state, running step and elapsed time on stderr while
	// the log streams (on a terminal, a status line kept below the log).
	p := newProgress(opts.IO, nil)
	p.quiet = opts.Quiet
	if p.st.tty {
		opts.status = p.st
	}
	pctx, stopPoll := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		_, _ = watchDeploy(pctx, watch{Client: client, ID: opts.ID, Interval: max(opts.PollInterval, time.Second),
			Grace: opts.FollowGrace, Submitted: true, OnPoll: p.update, OnLost: p.lost})
	}()
	defer func() {
		stopPoll()
		<-polled
		p.finish()
	}()
	es := &eventStream{
		client: client, hc: opts.StreamHTTP(), url: client.EventsURL(opts.ID, true), id: opts.ID, retryFor: opts.FollowGrace,
		onRewind: func(last, end int64) {
			p.say(fmt.Sprintf("the server's events of deploy %s now end at event %d, before event %d printed above: its database was restored from an older backup, and what the deploy did after the backup is undone there and runs again; printing the deploy's log again from its start",
				safeText(opts.ID), end, last))
		},
		onEvent: func(e api.Event) error {
			if e.Type != api.EventLog {
				return nil
			}
			var l api.EventLogData
			if err := json.Unmarshal(e.Data, &l); err != nil {
				return nil
			}
			err := writeLogLine(opts, manent.LogLine{Seq: e.Seq, Time: e.Time, Step: l.Step, Text: l.Text})
			p.wrote()
			return err
		},
	}
	if err := es.run(ctx); err != nil {
		// The deploy answered above: a refusal now is of a token that
		// expired or was revoked since.
		err = refusedWhileFollowing(opts.ID, err)
		if ctx.Err() == nil && transient(err) {
			// The server answered, then stayed away: the deploy goes on.
			err = &LostError{ID: opts.ID, Away: es.retryFor, Err: err}
		}
		return timedOut(err)
	}
	// The deploy itself (its error and rollback) decides the exit code.
	d, err := watchDeploy(ctx, watch{Client: client, ID: opts.ID, Interval: opts.PollInterval, Grace: opts.FollowGrace, Submitted: true})
	if err != nil {
		return timedOut(err)
	}
	return outcome(d)
}

func writeLogLine(opts *LogsOptions, l manent.LogLine) error {
	switch {
	case opts.Exporter != nil:
		return opts.Exporter.WriteStream(opts.IO.Out, l)
	case opts.Raw:
		_, err := io.WriteString(opts.IO.RawOut, l.Text+"\n")
		return err
	}
	if opts.status != nil {
		return opts.status.around(func() error { printLogLine(opts.IO, l); return nil })
	}
	printLogLine(opts.IO, l)
	return nil
}

// printLogLine prints `TIME [step] text`, the step and text sanitised.
func printLogLine(s *IOStreams, l manent.LogLine) {
	ts := s.Faint(l.Time.UTC().Format(logTimeLayout))
	if l.Step == "" {
		fmt.Fprintf(s.Out, "%s %s\n", ts, safeLines(l.Text))
		return
	}
	fmt.Fprintf(s.Out, "%s %s %s\n", ts, s.Bold("["+l.Step+"]"), safeLines(l.Text))
}
