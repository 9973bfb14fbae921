package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// StepsOptions are the inputs of `manent steps`.
type StepsOptions struct {
	IO       *IOStreams
	Client   func() (*api.Client, error)
	Exporter *Exporter
	Now      func() time.Time

	ID string
}

// NewCmdSteps builds `manent steps`.
func NewCmdSteps(f *Factory, runF func(*StepsOptions) error) *cobra.Command {
	opts := &StepsOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	return &cobra.Command{
		Use:   "steps <id>",
		Short: "List every recorded step of a deploy",
		Long: `List every recorded step of a deploy, including checkpoints, notifications
and rollback compensations: start, end, duration, attempts, output and
error. A step between two attempts is RUNNING with its last attempt's
error, next_attempt_at and max_attempts; the table says "attempt 1 of 4
failed; retrying in 2s" before the error. In the table the output is
compact JSON, cut to fit; -o json prints it whole as {"steps": [...]}.
When no step runs and the deploy has not ended, a line on stderr says what
it waits for (its approvals, its change ticket, its start time, the queue),
as 'manent status' does.`,
		Example: `  manent steps dpl_01JABCDEF
  manent steps dpl_01JABCDEF -o json | jq '.steps[] | select(.state == "ERROR")'`,
		Args: idArg("deploy id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			opts.Exporter = f.Exporter()
			if runF != nil {
				return runF(opts)
			}
			return unknownDeploy(stepsRun(cmd.Context(), opts))
		},
	}
}

// StepsOutput is the `steps -o json` document.
type StepsOutput struct {
	Steps []manent.Step `json:"steps"`
}

func stepsRun(ctx context.Context, opts *StepsOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	steps, err := client.Steps(ctx, opts.ID)
	if err != nil {
		return err
	}
	if steps == nil {
		steps = []manent.Step{}
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, StepsOutput{Steps: steps})
	}
	if err := renderSteps(opts.IO, opts.IO.Out, steps, opts.Now()); err != nil {
		return err
	}
	sayWhyNoStepRuns(ctx, client, opts, steps)
	return nil
}

// sayWhyNoStepRuns says on stderr what a deploy that has not ended and
// runs no step waits for (its approvals, its change ticket, its start
// time, the deploys it is after, its place in the queue): the table alone
// shows its steps PENDING, and waiting is never silent. Nothing when a step
// runs (its row says so), the deploy has ended, or it cannot be read.
func sayWhyNoStepRuns(ctx context.Context, client *api.Client, opts *StepsOptions, steps []manent.Step) {
	for _, st := range steps {
		if st.State == manent.StepRunning {
			return
		}
	}
	d, err := client.Deployment(ctx, opts.ID)
	if err != nil || d.State.Final() || d.Reason == "" {
		return
	}
	fmt.Fprintf(opts.IO.ErrOut, "no step is running: deploy %s is %s: %s ('manent status %s' says more)\n",
		safeText(opts.ID), d.State, safeText(d.Reason), safeText(opts.ID))
}

// outputWidth is how much of a step's output the table shows.
const outputWidth = 60

// renderSteps prints one row per recorded step.
func renderSteps(s *IOStreams, w io.Writer, steps []manent.Step, now time.Time) error {
	t := s.NewTable("STEP", "STATE", "STARTED", "FINISHED", "DURATION", "ATTEMPTS", "OUTPUT", "ERROR").StateColumn(1)
	for _, st := range steps {
		out := ""
		if len(st.Output) > 0 && string(st.Output) != "null" {
			out = truncate(compactJSON(st.Output), outputWidth)
		}
		t.AddRow(st.Name, string(st.State), formatTimePtr(st.StartedAt), formatTimePtr(st.FinishedAt),
			durationCell(st.StartedAt, st.FinishedAt, now), attempts(st.Attempts), out, stepErrorCell(st, now))
	}
	return t.RenderTo(w)
}
