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

// ListOptions are the inputs of `manent list`.
type ListOptions struct {
	IO       *IOStreams
	Client   func() (*api.Client, error)
	Exporter *Exporter
	Now      func() time.Time

	Application string
	Environment string
	State       string
	Limit       int
	Cursor      string
}

// NewCmdList builds `manent list`.
func NewCmdList(f *Factory, runF func(*ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "list [--application A] [--environment E] [--state S]",
		Short: "List deploys, newest first",
		Long: `List deploys, newest first, one page at a time. When there are more, the
command to see the next page is printed on stderr. AGE is how long ago the
deploy was submitted ("3m ago"); -o json/yaml have the RFC 3339 times.`,
		Example: `  manent list
  manent list --application billing --environment prod --limit 5
  manent list --state ERROR -o json | jq -r '.items[].id'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Exporter = f.Exporter()
			if opts.State != "" {
				st := manent.State(strings.ToUpper(opts.State))
				if !st.Valid() {
					return usageErrorf("invalid --state %q: want one of %s", opts.State, stateNames())
				}
				opts.State = string(st)
			}
			if opts.Limit < 0 || opts.Limit > api.MaxPage {
				return usageErrorf("--limit must be from 1 to %d (0: the server's default), got %d", api.MaxPage, opts.Limit)
			}
			if err := checkFilterNames(opts.Application, opts.Environment); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Application, "application", "", "only deploys of this application")
	cmd.Flags().StringVar(&opts.Environment, "environment", "", "only deploys to this environment")
	cmd.Flags().StringVar(&opts.State, "state", "", "only deploys in this state (e.g. PENDING, ERROR)")
	cmd.Flags().IntVar(&opts.Limit, "limit", 0, "deploys per page, at most 500 (0: the server's default)")
	cmd.Flags().StringVar(&opts.Cursor, "cursor", "", "page to show, as printed after the previous page")
	_ = cmd.RegisterFlagCompletionFunc("state", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return strings.Split(stateNames(), ", "), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

func stateNames() string {
	names := make([]string, len(manent.States))
	for i, s := range manent.States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// ListOutput is the `list -o json` document; NextCursor is "" on the last page.
type ListOutput struct {
	Items      []manent.Deployment `json:"items"`
	NextCursor string              `json:"next_cursor"`
}

func listRun(ctx context.Context, opts *ListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	res, err := client.List(ctx, api.ListOptions{
		Application: opts.Application,
		Environment: opts.Environment,
		State:       opts.State,
		Limit:       opts.Limit,
		Cursor:      opts.Cursor,
	})
	if err != nil {
		return err
	}
	out := ListOutput{Items: res.Items, NextCursor: res.NextCursor}
	if out.Items == nil {
		out.Items = []manent.Deployment{}
	}
	if opts.Exporter != nil {
		if err := opts.Exporter.Write(opts.IO.Out, out); err != nil {
			return err
		}
	} else {
		now := opts.Now()
		t := opts.IO.NewTable("ID", "APPLICATION", "ENVIRONMENT", "VERSION", "STATE", "REQUESTER", "AGE").StateColumn(4)
		for _, d := range out.Items {
			t.AddRow(d.ID, d.Application, d.Environment, d.Version, string(d.State), d.Requester, relativeTime(d.CreatedAt, now))
		}
		if t.Len() == 0 {
			fmt.Fprintln(opts.IO.ErrOut, "no deploys")
		} else if err := t.Render(); err != nil {
			return err
		}
	}
	if out.NextCursor != "" {
		fmt.Fprintf(opts.IO.ErrOut, "next: manent list --cursor %s%s\n", safeText(out.NextCursor), opts.filterArgs())
	}
	return nil
}

// filterArgs repeats the filters for the next-page hint.
func (opts *ListOptions) filterArgs() string {
	var b strings.Builder
	for _, kv := range [][2]string{
		{"application", opts.Application},
		{"environment", opts.Environment},
		{"state", opts.State},
	} {
		if kv[1] != "" {
			fmt.Fprintf(&b, " --%s %s", kv[0], kv[1])
		}
	}
	if opts.Limit > 0 {
		fmt.Fprintf(&b, " --limit %d", opts.Limit)
	}
	return b.String()
}
