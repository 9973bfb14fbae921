package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// CancelOptions are the inputs of `manent cancel`.
type CancelOptions struct {
	IO       *IOStreams
	Client   func() (*api.Client, error)
	Exporter *Exporter

	ID string
}

// NewCmdCancel builds `manent cancel`.
func NewCmdCancel(f *Factory, runF func(*CancelOptions) error) *cobra.Command {
	opts := &CancelOptions{IO: f.IOStreams, Client: f.Client}
	return &cobra.Command{
		Use:   "cancel <id>",
		Short: "Cancel a deploy",
		Long: `Ask the server to cancel a deploy. A waiting deploy is cancelled at once; a
running one stops at the start of its next step (the running step
completes, so no target is left half written; only an artifact download,
which writes no target, is cut within a second) and ends CANCELLED; when
rollback is enabled, what it had already changed on the target (a rollout's
first waves, say) is rolled back first. A cancel
that arrives during the deploy's last step has nothing left to stop: the
deploy ends as that step does, and its log says so. The deploy's error
names who cancelled it ("cancelled by token:ci"). Use 'manent wait' to
see it end. The answer says "cancelled" for a deploy that ended at once,
"cancel requested (state PENDING)" for a running one. A cancel the server
refuses without acting, saying when to come back (429 past
limits.refusals_per_minute, 503 while its database is busy), is sent
again after that Retry-After when it is at most 30s (4 more times at
most); a longer one is not waited for, and the error says when to try
again.`,
		Example: `  manent cancel dpl_01JABCDEF
  # deploy dpl_01JABCDEF: cancel requested (state PENDING)
  # deploy dpl_01JABCDEF: cancelled          (it was still waiting)

  manent cancel dpl_01JABCDEF && manent wait dpl_01JABCDEF`,
		Args: idArg("deploy id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			opts.Exporter = f.Exporter()
			if runF != nil {
				return runF(opts)
			}
			return unknownDeploy(cancelRun(cmd.Context(), opts))
		},
	}
}

func cancelRun(ctx context.Context, opts *CancelOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	d, err := client.Cancel(ctx, opts.ID)
	if manent.ErrorCode(err) == manent.EConflict {
		return cancelEnded(ctx, client, opts.ID, err)
	}
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, d)
	}
	id := d.ID
	if id == "" {
		id = opts.ID
	}
	if d.State == manent.StateCancelled {
		// It had not started: it ended at once.
		_, err = fmt.Fprintf(opts.IO.Out, "deploy %s: cancelled\n", safeText(id))
		return err
	}
	if _, err = fmt.Fprintf(opts.IO.Out, "deploy %s: cancel requested (state %s)\n", safeText(id), opts.IO.State(string(d.State))); err != nil {
		return err
	}
	if d.State == manent.StatePending {
		// Running: it ends at its next step, which may be a while. The
		// server says what it waits for (and when the running step is its
		// last, that it ends as that step does).
		why := d.Reason
		if why == "" {
			why = "the running step completes first, then the deploy ends CANCELLED"
		}
		_, err = fmt.Fprintf(opts.IO.ErrOut, "%s; 'manent wait %s' follows it\n", safeText(why), safeText(id))
	}
	return err
}

// cancelEnded is the refusal to cancel deploy id that has ended (409),
// with what the user may have meant: going back to the release before a
// deploy that succeeded is a rollback. The exit code stays the refusal's.
func cancelEnded(ctx context.Context, client *api.Client, id string, refused error) error {
	d, err := client.Deployment(ctx, id)
	if err != nil || !d.State.Final() {
		return refused
	}
	if d.State != manent.StateSuccess {
		return &HintedError{Err: refused, Hint: fmt.Sprintf("nothing to cancel: deploy %s has ended (%s); 'manent status %s' says why", safeText(id), d.State, safeText(id))}
	}
	return &HintedError{Err: refused, Hint: fmt.Sprintf("nothing to cancel; 'manent rollback %s %s' goes back to the previous release", safeText(d.Application), safeText(d.Environment))}
}
