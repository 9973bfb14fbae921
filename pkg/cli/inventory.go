package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// InventoryOptions are the inputs of `manent inventory`.
type InventoryOptions struct {
	IO       *IOStreams
	Client   func() (*api.Client, error)
	Exporter *Exporter
	// Now is the clock the FINISHED column is relative to.
	Now func() time.Time
}

// NewCmdInventory builds `manent inventory`.
func NewCmdInventory(f *Factory, runF func(*InventoryOptions) error) *cobra.Command {
	opts := &InventoryOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	return &cobra.Command{
		Use:   "inventory",
		Short: "Show the current release and last failure of every environment",
		Long: `Show, for every application and environment, the current release (the
version of the last SUCCESS deploy) and the last failure with its error and
rollback outcome. FINISHED is how long ago the current release's deploy
ended ("3m ago"); -o json and -o yaml carry the RFC 3339 time.`,
		Example: `  manent inventory
  manent inventory -o json | jq '.items[] | select(.environment == "prod")'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Exporter = f.Exporter()
			if runF != nil {
				return runF(opts)
			}
			return inventoryRun(cmd.Context(), opts)
		},
	}
}

func inventoryRun(ctx context.Context, opts *InventoryOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	res, err := client.Inventory(ctx)
	if err != nil {
		return err
	}
	if res.Items == nil {
		res.Items = []manent.InventoryEntry{}
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, res)
	}
	if len(res.Items) == 0 {
		fmt.Fprintln(opts.IO.ErrOut, "no releases yet")
		return nil
	}
	t := opts.IO.NewTable("APPLICATION", "ENVIRONMENT", "CURRENT", "DEPLOY", "FINISHED", "LAST FAILURE")
	now := time.Now()
	if opts.Now != nil {
		now = opts.Now()
	}
	for _, e := range res.Items {
		var version, id, finished string
		if c := e.Current; c != nil {
			version, id, finished = c.Version, c.DeploymentID, relativeTimePtr(c.FinishedAt, now)
		}
		t.AddRow(e.Application, e.Environment, version, id, finished, lastFailure(e.LastFailure))
	}
	return t.Render()
}

// lastFailure prints `1.4.3 (dpl_x): step "deploy" failed: … [rollback completed]`.
func lastFailure(r *manent.Release) string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(r.Version)
	if r.DeploymentID != "" {
		fmt.Fprintf(&b, " (%s)", r.DeploymentID)
	}
	if r.Error != "" {
		b.WriteString(": " + r.Error)
	}
	if r.Rollback != "" {
		fmt.Fprintf(&b, " [rollback %s]", r.Rollback)
	}
	return b.String()
}
