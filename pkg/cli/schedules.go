package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
)

// SchedulesOptions are the inputs of `manent schedules`.
type SchedulesOptions struct {
	IO       *IOStreams
	Client   func() (*api.Client, error)
	Exporter *Exporter
	Now      func() time.Time

	Delete string
}

// NewCmdSchedules builds `manent schedules list|delete`.
func NewCmdSchedules(f *Factory, runF func(*SchedulesOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedules [list | delete <schedule id>]",
		Short: "List or delete recurring deploys",
		Long: `A descriptor with schedule.cron makes a recurring deploy: the server answers
with a schedule id (state SCHEDULED) and each tick creates a deploy
<schedule>@<UTC time> through the same checks.

schedule.cron takes standard 5-field cron ("0 3 * * 1-5"), optionally after
CRON_TZ=<zone> or TZ=<zone> ("CRON_TZ=Europe/Paris 0 3 * * *"; UTC
otherwise), or @hourly, @daily, @weekly, @monthly, @every <duration> (whole
seconds, from 1s to 8760h). The server refuses a schedule that fires more
often than its schedules.min_interval (default 1m), and one that fires at the
same times as a schedule its application/environment already has (each tick
would deploy twice): to change a schedule, delete it and submit it again.`,
		Example: `  manent schedules            # the same as 'manent schedules list'
  manent schedules delete sch_4f1c2a9e0b7d3c11`,
		Args: groupArgs,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the recurring deploys",
		Long: `List the recurring deploys. LAST TICK and NEXT TICK are relative ("3m ago",
"in 2h"); -o json/yaml have the RFC 3339 times.`,
		Example: `  manent schedules list -o json`,
		Args:    exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			opts := &SchedulesOptions{IO: f.IOStreams, Client: f.Client, Exporter: f.Exporter(), Now: f.Now}
			if runF != nil {
				return runF(opts)
			}
			return schedulesRun(c.Context(), opts)
		},
	}
	del := &cobra.Command{
		Use:     "delete <schedule id>",
		Short:   "Stop a recurring deploy (deploys already created are not affected)",
		Example: `  manent schedules delete sch_4f1c2a9e0b7d3c11`,
		Args:    idArg("schedule id"),
		RunE: func(c *cobra.Command, args []string) error {
			opts := &SchedulesOptions{IO: f.IOStreams, Client: f.Client, Exporter: f.Exporter(), Delete: args[0]}
			if runF != nil {
				return runF(opts)
			}
			return schedulesRun(c.Context(), opts)
		},
	}
	cmd.RunE = list.RunE
	cmd.AddCommand(list, del)
	return cmd
}

func schedulesRun(ctx context.Context, opts *SchedulesOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	if opts.Delete != "" {
		if err := client.DeleteSchedule(ctx, opts.Delete); err != nil {
			return err
		}
		_, err := fmt.Fprintf(opts.IO.Out, "schedule %s deleted\n", opts.Delete)
		return err
	}
	res, err := client.Schedules(ctx)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, res)
	}
	now := opts.Now()
	t := opts.IO.NewTable("ID", "APPLICATION", "ENVIRONMENT", "CRON", "STATE", "LAST TICK", "NEXT TICK", "LAST DEPLOY", "LAST ERROR")
	for _, s := range res.Items {
		t.AddRow(s.ID, s.Application, s.Environment, s.Cron, s.State, relativeTimePtr(s.LastTick, now), relativeTimePtr(s.NextTick, now),
			orDash(s.LastDeploy), orDash(s.LastError))
	}
	if t.Len() == 0 {
		_, err := fmt.Fprintln(opts.IO.ErrOut, "no recurring deploys")
		return err
	}
	return t.Render()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
