package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// ValidateOptions are the inputs of `manent validate`.
type ValidateOptions struct {
	IO        *IOStreams
	Client    func() (*api.Client, error)
	ReadInput func(name string) ([]byte, string, error)
	Exporter  *Exporter

	File    string
	Offline bool
}

// NewCmdValidate builds `manent validate`. runF, when not nil, replaces
// validateRun (tests use it to check flag parsing).
func NewCmdValidate(f *Factory, runF func(*ValidateOptions) error) *cobra.Command {
	opts := &ValidateOptions{IO: f.IOStreams, Client: f.Client, ReadInput: f.ReadInput}
	cmd := &cobra.Command{
		Use:   "validate -f <file> [--offline]",
		Short: "Check a deploy descriptor without deploying it",
		Long: `Check a deploy descriptor and report every problem at once, each with its
JSON path and line:column in the file. A YAML syntax error has a line only
(file:LINE: invalid YAML: …; no "column" in -o json): the YAML parser does
not say the column.

Without --offline the server runs every submission check (descriptor,
permissions, sources, environment configuration, plugins and their
settings, governance, plan) without enqueueing anything, and prints what
the deploy would wait for (schedule.at, after, the approvals and change
ticket governance requires now, the waves that need an approval), the
plan and the effective (merged) deploy. The descriptor's own problems and
those of the server's checks on it (plugins and their settings, sources,
environment configuration) come together, ordered by position; governance
and the plan are checked once the descriptor itself is valid.
The plan says what a failure of each step does under the effective rollback
policy: stop, roll back, or stop with the new release left live (a step
after activation that is not in rollback.on). A step of rollback.on that
runs before deploy stops: nothing is deployed yet to roll back. With --offline only the
descriptor is checked, locally, with no server.

Exit status: 0 valid, 1 invalid, 2 usage error (e.g. the file cannot be read).`,
		Example: `  # check the file locally, no server needed
  manent validate -f deploy.yml --offline

  # run every server-side check and show the plan
  manent validate -f deploy.yml

  # machine-readable result: {"valid", "errors", "plan", "effective", "decision"}
  manent validate -f deploy.yml -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Exporter = f.Exporter()
			if runF != nil {
				return runF(opts)
			}
			return validateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.File, "file", "f", "", "descriptor to check (- reads stdin)")
	cmd.Flags().BoolVar(&opts.Offline, "offline", false, "check the descriptor locally only, without the server")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "yml", "yaml", "json")
	return cmd
}

// ValidationError is one problem of a descriptor in `validate -o json`.
// Column is left out when it is unknown: a YAML syntax error has a line
// only.
type ValidationError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
	Line    int    `json:"line"`
	Column  int    `json:"column,omitempty"`
}

// ValidateResult is the `validate -o json` document (SPEC §7 [contract]).
type ValidateResult struct {
	Valid  bool              `json:"valid"`
	Errors []ValidationError `json:"errors"`
	// Plan and Effective come from the server; null with --offline.
	Plan      *manent.Plan   `json:"plan"`
	Effective map[string]any `json:"effective"`
	// Decision is the governance decision the deploy would get now: the
	// approvals and change ticket it would wait for (null with --offline).
	Decision *manent.Decision `json:"decision,omitempty"`
	Notice   string           `json:"notice,omitempty"`
}

func validateRun(ctx context.Context, opts *ValidateOptions) error {
	data, name, err := opts.ReadInput(opts.File)
	if err != nil {
		return err
	}
	res := ValidateResult{Errors: []ValidationError{}}
	if opts.Offline {
		if _, err := descriptor.Parse(data); err != nil {
			fields, ok := invalidFields(err)
			if !ok {
				return err
			}
			res.Errors = fields
		}
	} else {
		client, err := opts.Client()
		if err != nil {
			return err
		}
		sr, err := client.Submit(ctx, data, true)
		switch {
		case err != nil:
			fields, ok := invalidFields(err)
			if !ok {
				return err
			}
			res.Errors = fields
		default:
			res.Plan, res.Effective, res.Decision, res.Notice = sr.Plan, sr.Effective, sr.Decision, sr.Notice
			res.Errors = append(res.Errors, toValidationErrors(sr.Errors)...)
			if sr.Valid != nil && !*sr.Valid && len(res.Errors) == 0 {
				res.Errors = append(res.Errors, ValidationError{Message: "the server refused the descriptor"})
			}
		}
	}
	res.Valid = len(res.Errors) == 0

	if opts.Exporter != nil {
		if err := opts.Exporter.Write(opts.IO.Out, res); err != nil {
			return err
		}
	} else if err := printValidateResult(opts.IO, name, res); err != nil {
		return err
	}
	if !res.Valid {
		return &SilentError{Code: ExitFailed}
	}
	return nil
}

// invalidFields turns an "invalid input" error (local or from the server)
// into validation errors; ok is false for any other error.
func invalidFields(err error) (_ []ValidationError, ok bool) {
	var e *manent.Error
	if !errors.As(err, &e) || (e.Code != manent.EInvalid && e.Code != manent.ETooLarge) {
		return nil, false
	}
	if len(e.Fields) == 0 {
		return []ValidationError{{Message: e.Error()}}, true
	}
	return toValidationErrors(e.Fields), true
}

func toValidationErrors(fields []manent.FieldError) []ValidationError {
	out := make([]ValidationError, 0, len(fields))
	for _, f := range fields {
		out = append(out, ValidationError{Path: f.Path, Message: f.Message, Line: f.Line, Column: f.Column})
	}
	return out
}

// effectiveRollback reads the rollback policy of an effective deploy.
func effectiveRollback(eff map[string]any) (enabled bool, on []string) {
	rb, _ := eff["rollback"].(map[string]any)
	enabled, _ = rb["enabled"].(bool)
	list, _ := rb["on"].([]any)
	for _, v := range list {
		if name, ok := v.(string); ok {
			on = append(on, name)
		}
	}
	return enabled, on
}

// printValidateResult prints "<file> is valid" with the plan and effective
// deploy, or each error on stderr as "<file>:LINE:COL: /path: message".
func printValidateResult(s *IOStreams, name string, res ValidateResult) error {
	if res.Notice != "" {
		fmt.Fprintf(s.ErrOut, "notice: %s\n", safeLines(res.Notice))
	}
	if !res.Valid {
		for _, e := range res.Errors {
			fmt.Fprintln(s.ErrOut, safeLines(formatValidationError(name, e)))
		}
		return nil
	}
	fmt.Fprintf(s.Out, "%s is valid\n", name)
	if waits := validateWaits(res); len(waits) > 0 {
		fmt.Fprintf(s.Out, "\n%s\n", s.Bold("Waits for:"))
		for _, w := range waits {
			fmt.Fprintf(s.Out, "  %s\n", safeText(w))
		}
	}
	if d := res.Decision; d != nil && d.Freeze != "" {
		fmt.Fprintf(s.Out, "note: the environment is frozen by %q; this identity may break the freeze, and the deploy will (break glass, recorded in the audit log)\n",
			safeText(strings.TrimSuffix(d.Freeze, " (break glass)")))
	}
	if res.Plan != nil {
		fmt.Fprintf(s.Out, "\n%s\n", s.Bold("Plan:"))
		enabled, on := effectiveRollback(res.Effective)
		// No TIMEOUT column: the engine bounds no step itself; a plugin
		// applies its own (the script plugin's with.timeout, default 10m),
		// which the plan does not know, and PlanStep.Timeout stays empty
		// (filling it would change the plan digest approvals are bound to).
		t := s.NewTable("#", "STEP", "PLUGIN", "MAX RETRIES", "ON FAILURE")
		// A failure rolls back what deploy and activation changed (the
		// engine checkpoints those two): a step in rollback.on that fails
		// before deploy has started stops with nothing to roll back.
		activated, deploying := false, false
		var live []string // steps after activation whose failure leaves the release live
		for i, st := range res.Plan.Steps {
			deploying = deploying || st.Name == manent.StepDeploy || st.Name == manent.StepActivation
			onFailure := "stop"
			if enabled && deploying && slices.Contains(on, st.Name) {
				onFailure = "roll back"
			} else if activated {
				onFailure = "stop, new release stays live"
				live = append(live, st.Name)
			}
			t.AddRow(strconv.Itoa(i+1), st.Name, st.Plugin, strconv.Itoa(st.MaxRetries), onFailure)
			activated = activated || st.Name == manent.StepActivation
		}
		if err := t.Render(); err != nil {
			return err
		}
		if enabled && len(live) > 0 {
			fmt.Fprintf(s.Out, "note: rollback is enabled, but %s runs after activation and is not in rollback.on: if it fails, the new release stays live (list it in rollback.on to roll back)\n",
				safeText(strings.Join(live, ", ")))
		}
	}
	if res.Effective != nil {
		fmt.Fprintf(s.Out, "\n%s\n", s.Bold("Effective deploy:"))
		if err := writeIndentedYAML(s.Out, res.Effective); err != nil {
			return err
		}
	}
	return nil
}

// validateWaits lists what the deploy would wait for before it runs, as
// the run waits (SPEC §4): its start time (schedule.at), the deploys of
// `after`, the approvals and change ticket of the governance decision, and
// the rollout waves that wait for an approval.
func validateWaits(res ValidateResult) []string {
	var out []string
	if sched, _ := res.Effective["schedule"].(map[string]any); sched != nil {
		if at, _ := sched["at"].(string); at != "" {
			out = append(out, "schedule.at "+at)
		}
	}
	if after, _ := res.Effective["after"].([]any); len(after) > 0 {
		ids := make([]string, 0, len(after))
		for _, a := range after {
			ids = append(ids, fmt.Sprint(a))
		}
		out = append(out, "after: "+strings.Join(ids, ", ")+" to succeed")
	}
	if d := res.Decision; d != nil {
		if d.ApprovalsRequired > 0 {
			a := manent.Plural(d.ApprovalsRequired, "approval")
			if len(d.Approvers) > 0 {
				a += " by " + strings.Join(d.Approvers, ", ")
			}
			if exp, err := time.ParseDuration(d.ApprovalsExpire); err == nil && exp > 0 {
				a += " (within " + formatDuration(exp) + ")"
			}
			out = append(out, a)
		}
		if d.ChangeRequired {
			out = append(out, "an approved change ticket")
		}
	}
	if rollout, _ := res.Effective["rollout"].(map[string]any); rollout != nil {
		waves, _ := rollout["waves"].([]any)
		for _, w := range waves {
			if wave, _ := w.(map[string]any); wave != nil && wave["approval"] == true {
				out = append(out, fmt.Sprintf("an approval of wave %v before it starts", wave["name"]))
			}
		}
	}
	return out
}

// formatValidationError prints "<file>:LINE:COL: /path: message", leaving out
// the position or the path when unknown.
func formatValidationError(name string, e ValidationError) string {
	var b strings.Builder
	b.WriteString(name)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// writeIndentedYAML prints v as YAML indented by two spaces.
func writeIndentedYAML(w io.Writer, v any) error {
	data, err := marshalJSON(v, false)
	if err != nil {
		return err
	}
	y, err := jsonToYAML(data)
	if err != nil {
		return err
	}
	for _, line := range strings.SplitAfter(strings.TrimRight(string(y), "\n"), "\n") {
		if _, err := io.WriteString(w, "  "+line); err != nil {
			return err
		}
	}
	_, err = io.WriteString(w, "\n")
	return err
}
