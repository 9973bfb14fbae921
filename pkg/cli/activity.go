package cli

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// ActivityOptions are the inputs of `manent activity`.
type ActivityOptions struct {
	IO       *IOStreams
	Client   func() (*api.Client, error)
	Exporter *Exporter
	Now      func() time.Time
	// StreamHTTP is the HTTP client of the event stream (--watch).
	StreamHTTP func() *http.Client

	// Watch follows the activity after printing it (activity_watch.go).
	Watch bool
	// Interval is how often --watch refreshes without an event.
	Interval time.Duration
	// FollowGrace is how long --watch asks again a server that stopped
	// answering before it exits 4 (DefaultFollowGrace when 0).
	FollowGrace time.Duration
}

// NewCmdActivity builds `manent activity`.
func NewCmdActivity(f *Factory, runF func(*ActivityOptions) error) *cobra.Command {
	opts := &ActivityOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now, StreamHTTP: f.StreamHTTP}
	cmd := &cobra.Command{
		Use:   "activity",
		Short: "Show everything running or waiting now, and why it waits",
		Long: `Show every deploy that runs or waits now, grouped by environment: the
running ones with the step they are in, then the queued ones with their
place in the queue of their application/environment and the deploy ahead
of them, then those waiting for approvals, dependencies or a start time,
with what they wait for. AGE is when a running deploy started or a waiting
one was submitted ("3m ago"); -o json/yaml have the RFC 3339 times.

With --watch (-w) the command prints the activity as one table with an
ENVIRONMENT column, then keeps running and prints a row whenever a deploy
appears, changes state or reason (e.g. moves up the queue), or leaves the
activity (with its final state: "finished", or why it failed), until
Ctrl-C, which ends it with exit 0. It learns of changes from the server's
event stream and also asks again every --interval. With -o json (or --jq)
it prints one activity item per line instead: each one at the start, then
each change.`,
		Example: `  manent activity
  manent activity -o json | jq '.environments[] | select(.environment == "prod") | .items[].reason'

  # follow what runs and waits, until Ctrl-C
  manent activity --watch
  manent activity -w --jq 'select(.environment == "prod") | "\(.id) \(.state)"'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Exporter = f.Exporter()
			opts.FollowGrace = f.followGrace()
			if opts.Interval < minWatchInterval {
				return usageErrorf("--interval must be at least %s", minWatchInterval)
			}
			if runF != nil {
				return runF(opts)
			}
			return activityRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Watch, "watch", "w", false, "after the activity, print each change until Ctrl-C")
	cmd.Flags().DurationVar(&opts.Interval, "interval", DefaultWatchInterval, "with --watch, ask the server again at least this often")
	return cmd
}

func activityRun(ctx context.Context, opts *ActivityOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	res, err := client.Activity(ctx)
	if err != nil {
		return err
	}
	if res.Environments == nil {
		res.Environments = []api.ActivityGroup{}
	}
	if opts.Watch {
		return activityWatch(ctx, opts, client, res)
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, res)
	}
	if len(res.Environments) == 0 {
		fmt.Fprintln(opts.IO.ErrOut, "nothing is running or waiting")
		return nil
	}
	now := opts.Now()
	for i, g := range res.Environments {
		if i > 0 {
			fmt.Fprintln(opts.IO.Out)
		}
		fmt.Fprintln(opts.IO.Out, opts.IO.Bold("Environment "+g.Environment))
		t := opts.IO.NewTable("ID", "APPLICATION", "VERSION", "STATE", "AGE", "WHY").StateColumn(3)
		for _, it := range g.Items {
			t.AddRow(it.ID, it.Application, it.Version, string(it.State), activityAge(it, now), it.Why())
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	return nil
}

// activityAge is when a running deploy started, or when a waiting one was
// submitted, relative to now ("3m ago").
func activityAge(it api.ActivityItem, now time.Time) string {
	since := it.CreatedAt
	if it.State == manent.StatePending && it.StartedAt != nil {
		since = *it.StartedAt
	}
	return relativeTime(since, now)
}
