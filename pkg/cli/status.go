package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// StatusOptions are the inputs of `manent status`.
type StatusOptions struct {
	IO       *IOStreams
	Client   func() (*api.Client, error)
	Exporter *Exporter
	Now      func() time.Time

	ID string
	// Web prints (and on a desktop opens) the deploy's web page instead.
	Web bool
	// Effective prints the effective deploy it was admitted with instead.
	Effective bool
	Getenv    func(string) string
}

// NewCmdStatus builds `manent status`.
func NewCmdStatus(f *Factory, runF func(*StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "status <id>",
		Short: "Show a deploy: state, dates, decision, steps, error and rollback",
		Long: `Show a deploy: what is released where, its state and why it waits (its
place in the queue and the deploy ahead of it, the approvals it needs, the
deploys it depends on, its start time) or the step it runs, who
requested it, when it was created, started and finished, the governance
decision, each step's result, and for a failed deploy the error and the
rollback outcome.

-o json prints the deployment as the API returns it: id, application,
environment, version, state, requester, created_at, started_at,
finished_at, error, rollback, decision and steps.

--web prints the URL of the deploy's page in the web UI instead (and on a
desktop opens it), as 'manent open <id>'.

--effective prints instead, as YAML, the effective deploy the deploy was
admitted with: its descriptor merged with the environment configuration
of that day, credentials redacted — what it ran with, however deploy.yml
or the environment changed since ('manent diff' shows the current
release's). -o json prints {id, application, environment, version,
effective}.`,
		Example: `  manent status dpl_01JABCDEF
  manent status dpl_01JABCDEF -o json | jq -r .state
  manent status dpl_01JABCDEF --web
  diff <(manent status dpl_01JA --effective) <(manent status dpl_01JB --effective)`,
		Args: idArg("deploy id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			opts.Exporter = f.Exporter()
			if runF != nil {
				return runF(opts)
			}
			if opts.Web && opts.Effective {
				return usageErrorf("--web and --effective cannot be used together")
			}
			if opts.Effective {
				return unknownDeploy(effectiveRun(cmd.Context(), opts))
			}
			if opts.Web {
				return unknownDeploy(openRun(cmd.Context(), &OpenOptions{IO: opts.IO, Client: opts.Client, Getenv: opts.Getenv, ID: opts.ID}))
			}
			return unknownDeploy(statusRun(cmd.Context(), opts))
		},
	}
	cmd.Flags().BoolVar(&opts.Web, "web", false, "print (and on a desktop open) the deploy's page in the web UI")
	cmd.Flags().BoolVar(&opts.Effective, "effective", false, "print the effective deploy it was admitted with, as YAML")
	return cmd
}

// unknownDeployHint follows the 404 of a deploy id given to a command.
const unknownDeployHint = "'manent list' shows the deploys you may read (--application, --environment and --state narrow it)"

// unknownDeploy is the one way a command given a deploy id (status,
// steps, logs, wait, cancel, approve, reject, open) says the id is
// unknown: the server's "deploy <id> not found" (404) gets the hint
// unknownDeployHint. Other errors pass unchanged, and so do a 404 of
// something else (a deploy without a recorded effective deploy) and one
// of a deploy that had answered while followed (*GoneError: the database
// was restored, the id was right).
func unknownDeploy(err error) error {
	if manent.ErrorCode(err) != manent.ENotFound {
		return err
	}
	var (
		gone   *GoneError
		hinted *HintedError
	)
	if errors.As(err, &gone) || errors.As(err, &hinted) {
		return err
	}
	msg := manent.ErrorMessage(err)
	if !strings.HasPrefix(msg, "deploy ") || !strings.HasSuffix(msg, " not found") {
		return err
	}
	return &HintedError{Err: err, Hint: unknownDeployHint}
}

func statusRun(ctx context.Context, opts *StatusOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	d, err := client.Deployment(ctx, opts.ID)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, d)
	}
	return renderStatus(opts.IO, opts.IO.Out, d, opts.Now())
}

// effectiveRun prints the effective deploy opts.ID was admitted with.
func effectiveRun(ctx context.Context, opts *StatusOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	res, err := client.Effective(ctx, opts.ID)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, res)
	}
	y, err := effectiveYAML(res.Effective)
	if err != nil {
		return err
	}
	_, err = io.WriteString(opts.IO.Out, y)
	return err
}

// renderStatus prints a deployment for people: a block of label/value pairs,
// then one row per step.
func renderStatus(s *IOStreams, w io.Writer, d *manent.Deployment, now time.Time) error {
	f := s.NewFields()
	f.Add("ID", d.ID)
	f.Add("Application", d.Application)
	f.Add("Environment", d.Environment)
	f.Add("Version", d.Version)
	if d.RollbackOf != "" {
		f.Add("Rollback of", d.RollbackOf+" (manent rollback: the release current when it was submitted)")
	}
	f.AddStyled("State", s.State(string(d.State)))
	switch {
	case d.State == manent.StatePending && d.Queued:
		// Taken over from a worker: back in the queue, no step runs.
		f.Add("Waiting for", d.Reason)
	case d.State == manent.StatePending:
		f.Add("Running", runningStepLine(d.Steps, now))
		if d.Reason != "" {
			f.Add("Waiting for", d.Reason)
		}
	case !d.State.Final():
		f.Add("Waiting for", d.Reason)
	}
	f.Add("Requester", d.Requester)
	f.Add("Created", formatTime(d.CreatedAt))
	f.Add("Started", formatTimePtr(d.StartedAt))
	f.Add("Finished", formatTimePtr(d.FinishedAt))
	f.Add("Duration", durationCell(d.StartedAt, d.FinishedAt, now))
	f.Add("Error", d.Error)
	f.Add("Rollback", d.Rollback)
	f.Add("Decision", decisionSummary(d.Decision))
	if d.LogsRemovedFrom != nil {
		f.Add("Log", "log lines removed by retention from "+d.LogsRemovedFrom.UTC().Format(time.RFC3339)+" (retention.logs or retention.deploys): manent logs prints what is left")
	}
	f.Add("Artifact sha256", d.ArtifactSHA256)
	for _, a := range d.Approvals {
		line := a.Identity + " " + verdictDone(a.Verdict)
		if a.Comment != "" {
			line += ": " + a.Comment
		}
		f.Add("Approval", line)
	}
	for _, wv := range d.Rollout {
		for _, a := range wv.Approvals {
			line := a.Identity + " " + verdictDone(a.Verdict) + " wave " + wv.Name
			if a.Comment != "" {
				line += ": " + a.Comment
			}
			f.Add("Approval", line)
		}
	}
	if err := f.RenderTo(w); err != nil {
		return err
	}
	if len(d.Rollout) > 0 {
		fmt.Fprintln(w)
		t := s.NewTable("WAVE", "TARGETS", "STATE", "OBSERVE", "GATE", "MESSAGE")
		for _, wv := range d.Rollout {
			targets := strings.Join(wv.Targets, ",")
			if wv.Percent > 0 {
				targets = strconv.Itoa(wv.Percent) + "%"
			}
			t.AddRow(wv.Name, targets, wv.State, observeCell(wv, now), wv.Gate, wv.Message)
		}
		if err := t.RenderTo(w); err != nil {
			return err
		}
	}
	if len(d.Steps) > 0 {
		fmt.Fprintln(w)
		t := s.NewTable("STEP", "STATE", "ATTEMPTS", "DURATION", "ERROR").StateColumn(1)
		for _, st := range d.Steps {
			t.AddRow(st.Name, string(st.State), attempts(st.Attempts), durationCell(st.StartedAt, st.FinishedAt, now), stepErrorCell(st, now))
		}
		if err := t.RenderTo(w); err != nil {
			return err
		}
	}
	var deliveries []struct {
		Event, Step, URL, Channel, State, Error string
		Attempts                                []json.RawMessage
	}
	if len(d.Deliveries) > 0 && json.Unmarshal(d.Deliveries, &deliveries) == nil && len(deliveries) > 0 {
		fmt.Fprintln(w)
		t := s.NewTable("DELIVERY", "TO", "STATE", "ATTEMPTS", "ERROR")
		for _, dl := range deliveries {
			what, to := dl.Event, dl.URL
			if dl.Step != "" {
				what += " " + dl.Step
			}
			if dl.Channel != "" {
				to = "chat " + dl.Channel
			}
			t.AddRow(what, to, dl.State, strconv.Itoa(len(dl.Attempts)), dl.Error)
		}
		return t.RenderTo(w)
	}
	return nil
}

// observeCell is a wave's observation: the time left while it is
// observed, else its length.
func observeCell(wv manent.WaveStatus, now time.Time) string {
	if left := wv.ObserveLeft(now); left > 0 {
		return left.Round(time.Second).String() + " left"
	}
	return wv.Observe
}

// retryNote says what a step between two attempts waits for: `attempt 2
// of 5 failed; retrying in 4s` ("" when the step is not retrying). Its
// attempt count includes the attempts of executions before a recovery,
// which MaxAttempts (this execution's) does not bound.
func retryNote(st manent.Step, now time.Time) string {
	if !st.Retrying() {
		return ""
	}
	line := fmt.Sprintf("attempt %d", st.Attempts)
	if st.MaxAttempts >= st.Attempts {
		line += fmt.Sprintf(" of %d", st.MaxAttempts)
	}
	line += " failed; "
	if left := st.NextAttemptAt.Sub(now); left > 0 {
		line += "retrying in " + formatDuration((left + time.Second - 1).Truncate(time.Second))
	} else {
		line += "retrying now"
	}
	return line
}

// stepErrorCell is a step's error in a table: a retrying step's error is
// its last attempt's, and says another follows.
func stepErrorCell(st manent.Step, now time.Time) string {
	if note := retryNote(st, now); note != "" {
		return note + ": " + st.Error
	}
	return st.Error
}

func attempts(n int) string {
	if n <= 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// runningStepLine prints what a running deploy is doing: `step deploy,
// for 4s`, or `step deploy (attempt 2), 11m32s since its first attempt`
// — a step's start is its first attempt's, so after a retry or a crash
// the time counts the earlier attempts and any time between them.
func runningStepLine(steps []manent.Step, now time.Time) string {
	for i := len(steps) - 1; i >= 0; i-- {
		st := steps[i]
		if st.State != manent.StepRunning {
			continue
		}
		line := "step " + st.Name
		if note := retryNote(st, now); note != "" {
			return line + ", " + note + " (" + safeText(st.Error) + ")"
		}
		if st.Attempts > 1 {
			line += fmt.Sprintf(" (attempt %d)", st.Attempts)
		}
		if st.StartedAt != nil {
			if st.Attempts > 1 {
				line += ", " + formatDuration(now.Sub(*st.StartedAt)) + " since its first attempt"
			} else {
				line += ", for " + formatDuration(now.Sub(*st.StartedAt))
			}
		}
		return line
	}
	return "between steps"
}

// verdictDone is an approval's verdict ("approve", "reject") as done:
// "approved", "rejected"; another value as it is.
func verdictDone(v string) string {
	switch v {
	case "approve":
		return "approved"
	case "reject":
		return "rejected"
	}
	return v
}
