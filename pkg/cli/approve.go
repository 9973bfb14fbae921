package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// ApproveOptions are the inputs of `manent approve` and `manent reject`.
type ApproveOptions struct {
	IO       *IOStreams
	Client   func() (*api.Client, error)
	Exporter *Exporter

	ID         string
	Comment    string
	PlanDigest string
	// Wave pins the verdict to a rollout wave waiting for its approval.
	Wave   string
	Reject bool
}

// NewCmdApprove builds `manent approve`.
func NewCmdApprove(f *Factory, runF func(*ApproveOptions) error) *cobra.Command {
	return newCmdDecide(f, runF, false)
}

// NewCmdReject builds `manent reject`.
func NewCmdReject(f *Factory, runF func(*ApproveOptions) error) *cobra.Command {
	return newCmdDecide(f, runF, true)
}

func newCmdDecide(f *Factory, runF func(*ApproveOptions) error, reject bool) *cobra.Command {
	opts := &ApproveOptions{IO: f.IOStreams, Client: f.Client, Reject: reject}
	cmd := &cobra.Command{
		Use:   "approve <id>",
		Short: "Approve a deploy waiting for approvals",
		Long: `Record your approval of a deploy in AWAITING_APPROVAL. The submitter cannot
approve their own deploy, each identity counts once, and only identities the
governance rules name as approvers count. With --plan-digest (from
'manent status -o json'), the approval is refused if the plan changed since
you reviewed it. A deploy submitted before the one that made its
environment's current release cannot be approved (it would put an older
release back): reject it. When enough approvals are in, the deploy is
enqueued with the same id; if a deploy submitted after it succeeds while
it waits in the queue, it ends ERROR at its config step instead of
running.

A rollout wave with approval: true waits, once the deploy runs, for its
own approvals: --wave NAME decides on that wave, and is refused (exit 1)
when the deploy waits for anything else by then, so a verdict meant for
the deploy never counts for a wave, nor one meant for a wave for the next.
Without --wave the deploy is read first and the verdict pinned to what it
waits for then: its own approval, or the wave waiting for one (the output
names it). A verdict sent again (below) never counts for what the deploy
has reached meanwhile. A token that may approve but not read deploys sends
it unpinned, to what the deploy waits for when it arrives.

A verdict the server refuses without recording it, saying when to come
back (429 past limits.refusals_per_minute, 503 while its database is
busy), is sent again after that Retry-After when it is at most 30s (4 more
times at most); a longer one is not waited for, and the error says when
to try again.

Your approval sent again once the deploy has ended (cancelled, expired,
rejected by someone else) is answered as recorded, exit 0, and says that
the deploy has ended and that the verdict changes nothing.`,
		Example: `  manent approve dpl_01JABCDEF --comment "reviewed the diff"
  manent approve dpl_01JABCDEF --plan-digest "$(manent status dpl_01JABCDEF -o json | jq -r .plan_digest)"
  manent approve dpl_01JABCDEF --wave rest --comment "canary is healthy"`,
		Args: idArg("deploy id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			opts.Exporter = f.Exporter()
			if runF != nil {
				return runF(opts)
			}
			return unknownDeploy(approveRun(cmd.Context(), opts))
		},
	}
	if reject {
		cmd.Use = "reject <id>"
		cmd.Short = "Reject a deploy waiting for approvals"
		cmd.Long = `Reject a deploy in AWAITING_APPROVAL: it ends REJECTED and nothing runs.
The submitter cannot reject their own deploy (cancel it instead).

--wave NAME rejects a rollout wave waiting for its approval: the deploy
fails at that wave and the waves already started are compensated. It is
refused (exit 1) when the deploy waits for anything else by then.

A rejection the server refuses without recording it, saying when to come
back (429 past limits.refusals_per_minute, 503 while its database is
busy), is sent again after that Retry-After when it is at most 30s (4 more
times at most).`
		cmd.Example = `  manent reject dpl_01JABCDEF --comment "not during the sale"
  manent reject dpl_01JABCDEF --wave rest --comment "canary error rate is up"`
	} else {
		cmd.Flags().StringVar(&opts.PlanDigest, "plan-digest", "", "the plan digest you reviewed; refused if the plan changed")
	}
	cmd.Flags().StringVar(&opts.Wave, "wave", "", "decide on this rollout wave, refused if the deploy waits for anything else")
	cmd.Flags().StringVar(&opts.Comment, "comment", "", "a comment recorded with the decision (at most 4096 bytes; line breaks and tabs, no other control characters)")
	return cmd
}

func approveRun(ctx context.Context, opts *ApproveOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	verb := "approved"
	var call func() (any, error)
	switch {
	case opts.Reject && opts.Wave != "":
		verb = "rejected"
		call = func() (any, error) { return client.RejectWave(ctx, opts.ID, opts.Wave, opts.Comment) }
	case opts.Reject:
		verb = "rejected"
	case opts.Wave != "":
		call = func() (any, error) { return client.ApproveWave(ctx, opts.ID, opts.Wave, opts.Comment) }
	}
	if call == nil || (opts.Reject && opts.Wave == "") {
		// Pinned to what the deploy waits for as read now (DecideWaiting).
		v := "approve"
		if opts.Reject {
			v = "reject"
		}
		call = func() (any, error) {
			d, wave, err := client.DecideWaiting(ctx, opts.ID, v, opts.Comment, opts.PlanDigest)
			opts.Wave = wave
			return d, err
		}
	}
	if opts.Wave != "" && opts.PlanDigest != "" {
		return usageErrorf("--plan-digest is for the deploy's own approval, not a wave's: leave it out with --wave")
	}
	d, err := call()
	if err != nil {
		return verdictRefusal(err, opts.ID)
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, d)
	}
	what := "deploy " + safeText(opts.ID)
	if opts.Wave != "" {
		what = "wave " + safeText(opts.Wave) + " of deploy " + safeText(opts.ID)
	}
	// A verdict sent again is answered 200 whatever the deploy's state by
	// then: one that has ended is not moved by it, and says so — unless it
	// ended as a rejection ends it (REJECTED; ERROR for a wave's).
	if dep, ok := d.(*manent.Deployment); ok && dep != nil && dep.State.Final() && !endedByRejection(opts, dep.State) {
		_, err = fmt.Fprintf(opts.IO.Out, "%s %s, but the deploy has ended %s: this verdict changes nothing ('manent status %s' says why it ended)\n",
			what, verb, dep.State, safeText(opts.ID))
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "%s %s\n", what, verb)
	return err
}

// endedByRejection says whether a deploy in state may have ended so by
// the rejection opts sent.
func endedByRejection(opts *ApproveOptions, state manent.State) bool {
	if !opts.Reject {
		return false
	}
	return state == manent.StateRejected || (opts.Wave != "" && state == manent.StateError)
}

// verdictRefusal gives the governance refusals of a verdict (403s, like
// RBAC's) the hint that can help: the one of an RBAC refusal (ask for a
// grant) cannot, since no grant makes a submitter or a non-approver
// decide. The texts are pkg/engine's (gate.go, the deploy's and a wave's).
func verdictRefusal(err error, id string) error {
	if manent.ErrorCode(err) != manent.EForbidden {
		return err
	}
	msg := manent.ErrorMessage(err)
	switch {
	case strings.Contains(msg, " and cannot approve or reject "):
		return &HintedError{Err: err, Hint: fmt.Sprintf("the submitter of a deploy never decides on it: another approver must ('manent status %s' says whose approvals it waits for); to stop it, 'manent cancel %s'", safeText(id), safeText(id))}
	case strings.Contains(msg, " is not an approver of deploy "):
		return &HintedError{Err: err, Hint: "only the approvers the governance rule names count for this deploy (above): ask one of them; an rbac: grant does not make an approver — the rule does (governance.rules or governance.rego of the server's configuration)"}
	}
	return err
}
