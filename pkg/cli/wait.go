package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
)

// WaitOptions are the inputs of `manent wait`.
type WaitOptions struct {
	IO           *IOStreams
	Client       func() (*api.Client, error)
	Exporter     *Exporter
	PollInterval time.Duration
	// FollowGrace is how long a server that stopped answering is asked
	// again while following (DefaultFollowGrace when 0).
	FollowGrace time.Duration

	ID      string
	Timeout time.Duration
	// Quiet hides the progress on stderr.
	Quiet bool
}

// NewCmdWait builds `manent wait`.
func NewCmdWait(f *Factory, runF func(*WaitOptions) error) *cobra.Command {
	opts := &WaitOptions{IO: f.IOStreams, Client: f.Client, PollInterval: f.PollInterval}
	cmd := &cobra.Command{
		Use:   "wait <id> [--timeout <duration>]",
		Short: "Wait until a deploy is final",
		Long: `Wait until a deploy reaches a final state.

Exit status: 0 the deploy ended SUCCESS; 1 it ended in another final state
(the reason is printed on stderr: the failed step and its error, the
rollback outcome, "cancelled by <identity>", "superseded by <id>" for a schedule tick a
later tick replaced before it started, or the state); 3 --timeout elapsed
first; 4 the server is unreachable or answers with a server error. A server
that stops answering after it has answered once (a restart, a network cut)
is asked again for --follow-grace (default 30s; MANENT_FOLLOW_GRACE)
before that, as stderr says; the deploy goes on on
the server either way. Ctrl-C stops the waiting, not the deploy (exit 130):
'manent cancel <id>' does.`,
		Example: `  manent wait dpl_01JABCDEF
  manent wait dpl_01JABCDEF --timeout 10m

  # the final deployment as JSON
  manent wait dpl_01JABCDEF -o json`,
		Args: idArg("deploy id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			opts.Exporter = f.Exporter()
			opts.FollowGrace = f.followGrace()
			if opts.Timeout < 0 {
				return usageErrorf("--timeout must not be negative")
			}
			if runF != nil {
				return runF(opts)
			}
			return unknownDeploy(waitRun(cmd.Context(), opts))
		},
	}
	cmd.Flags().BoolVarP(&opts.Quiet, "quiet", "q", false, "no progress on stderr (state, step, queue position, elapsed time)")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 30*time.Minute, "give up after this long (exit 3); 0 waits forever")
	return cmd
}

func waitRun(ctx context.Context, opts *WaitOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	p := newProgress(opts.IO, nil)
	p.quiet = opts.Quiet
	d, err := watchDeploy(ctx, watch{Client: client, ID: opts.ID, Interval: opts.PollInterval, Timeout: opts.Timeout,
		Grace: opts.FollowGrace, OnPoll: p.update, OnLost: p.lost})
	p.finish()
	sayGoesOn(opts.IO, err, opts.ID)
	return finishFollow(opts.IO, opts.Exporter, d, err)
}
