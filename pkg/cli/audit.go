package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
)

// AuditOptions are the inputs of `manent audit`.
type AuditOptions struct {
	IO       *IOStreams
	Client   func() (*api.Client, error)
	Exporter *Exporter

	Action string
	Before int64
	Limit  int
}

// NewCmdAudit builds `manent audit`.
func NewCmdAudit(f *Factory, runF func(*AuditOptions) error) *cobra.Command {
	opts := &AuditOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log",
		Long: `Show the audit log, newest first: every state-changing call and every
deployment.finish, with identity, time, request id, outcome and the
client's address (CLIENT; -o json adds its user_agent). The log is
hash-chained; 'manent-server admin verify-audit' checks the chain. Needs the
audit.read permission.`,
		Example: `  manent audit --limit 20
  manent audit --action deployment.submit -o json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Limit < 1 || opts.Limit > api.MaxAuditPage {
				return usageErrorf("--limit must be from 1 to %d, got %d", api.MaxAuditPage, opts.Limit)
			}
			if opts.Before < 0 {
				return usageErrorf("--before must be a sequence number (1 or more), got %d", opts.Before)
			}
			opts.Exporter = f.Exporter()
			if runF != nil {
				return runF(opts)
			}
			return auditRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Action, "action", "", "only this action (deployment.submit, deployment.cancel, deployment.supersede, deployment.finish, …)")
	cmd.Flags().Int64Var(&opts.Before, "before", 0, "only entries before this sequence number (paging)")
	cmd.Flags().IntVar(&opts.Limit, "limit", 50, "how many entries (1–1000)")
	return cmd
}

func auditRun(ctx context.Context, opts *AuditOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	res, err := client.Audit(ctx, opts.Action, opts.Before, opts.Limit)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, res)
	}
	// CLIENT comes last: a script reading the columns before it by
	// position reads them as it did.
	t := opts.IO.NewTable("SEQ", "TIME", "IDENTITY", "ACTION", "TARGET", "OUTCOME", "DETAIL", "CLIENT")
	for _, e := range res.Items {
		t.AddRow(fmt.Sprint(e.Seq), e.Time.UTC().Format(time.RFC3339), e.Identity, e.Action, e.Target, e.Outcome, orDash(e.Detail), orDash(e.ClientAddr))
	}
	if err := t.Render(); err != nil {
		return err
	}
	if res.NextBefore > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "next: manent audit --before %d\n", res.NextBefore)
	}
	return nil
}
