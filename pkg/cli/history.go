package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// History, rollback, diff and DORA (SPEC §11.5).

// HistoryOptions are the inputs of `manent history`.
type HistoryOptions struct {
	IO       *IOStreams
	Client   func() (*api.Client, error)
	Exporter *Exporter
	Now      func() time.Time

	Application string
	Environment string
	Limit       int
	Cursor      string
}

// NewCmdHistory builds `manent history`.
func NewCmdHistory(f *Factory, runF func(*HistoryOptions) error) *cobra.Command {
	opts := &HistoryOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "history <application> <environment>",
		Short: "Show an environment's deploys, newest first, marking the current release",
		Long: `Show the deploys of one application in one environment, newest first, one
page at a time. The deploy whose release is live now is marked with "*" in
the CURRENT column (current: true in -o json); a deploy made by
'manent rollback' names the deploy it went back from in ROLLBACK OF
(rollback_of) and the deploy whose release it deployed again in RESTORES
(rollback_from; "-" for a rollback an earlier release submitted).
AGE (when it was submitted) and FINISHED are relative ("3m ago"); -o
json/yaml have the RFC 3339 times.

The application and environment are names as in deploy.yml (lowercase
letters, digits and "-", starting with a letter or digit, at most 63
characters); any other is a usage error (exit 2) and nothing is sent.`,
		Example: `  manent history billing prod
  manent history billing prod --limit 5 -o json | jq -r '.items[] | select(.current) | .version'`,
		Args: exactArgs(2, "an application and an environment"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Exporter = f.Exporter()
			opts.Application, opts.Environment = args[0], args[1]
			if err := checkEnvNames(opts.Application, opts.Environment); err != nil {
				return err
			}
			if opts.Limit < 0 || opts.Limit > api.MaxPage {
				return usageErrorf("--limit must be from 1 to %d (0: the server's default), got %d", api.MaxPage, opts.Limit)
			}
			if runF != nil {
				return runF(opts)
			}
			return historyRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&opts.Limit, "limit", 0, "deploys per page, at most 500 (0: the server's default)")
	cmd.Flags().StringVar(&opts.Cursor, "cursor", "", "the page after this cursor (printed on stderr)")
	return cmd
}

// checkEnvNames refuses an application or environment name that no
// descriptor may have (descriptor.NamePattern) before anything is sent: a
// usage error naming the value and the rule.
func checkEnvNames(application, environment string) error {
	if err := checkName("application name", application); err != nil {
		return err
	}
	return checkName("environment name", environment)
}

// checkFilterNames is checkEnvNames for the optional --application and
// --environment filters: a filter no descriptor may match ("Billing")
// would list nothing, as if nothing had been deployed.
func checkFilterNames(application, environment string) error {
	if application != "" {
		if err := checkName("--application", application); err != nil {
			return err
		}
	}
	if environment != "" {
		return checkName("--environment", environment)
	}
	return nil
}

// checkName is the usage error of value, named what, unless it is a valid
// application or environment name.
func checkName(what, value string) error {
	if descriptor.ValidName(value) {
		return nil
	}
	return usageErrorf("invalid %s %q: an application or environment name is %s (%s)",
		what, value, descriptor.NameRule, descriptor.NamePattern)
}

func historyRun(ctx context.Context, opts *HistoryOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	res, err := client.History(ctx, opts.Application, opts.Environment, opts.Limit, opts.Cursor)
	if err != nil {
		return err
	}
	if res.Items == nil {
		res.Items = []api.HistoryEntry{}
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, res)
	}
	if len(res.Items) == 0 {
		fmt.Fprintf(opts.IO.ErrOut, "no deploys of %s in %s yet\n", safeText(opts.Application), safeText(opts.Environment))
		return nil
	}
	now := opts.Now()
	t := opts.IO.NewTable("CURRENT", "ID", "VERSION", "STATE", "REQUESTER", "AGE", "FINISHED", "ROLLBACK OF", "RESTORES", "ERROR").StateColumn(3)
	for _, e := range res.Items {
		mark := ""
		if e.Current {
			mark = "*"
		}
		t.AddRow(mark, e.ID, e.Version, string(e.State), e.Requester, relativeTime(e.CreatedAt, now), relativeTimePtr(e.FinishedAt, now),
			e.RollbackOf, e.RollbackFrom, truncate(e.Error, 60))
	}
	if err := t.Render(); err != nil {
		return err
	}
	if res.NextCursor != "" {
		next := fmt.Sprintf("manent history %s %s --cursor %s", opts.Application, opts.Environment, res.NextCursor)
		if opts.Limit > 0 {
			next += " --limit " + strconv.Itoa(opts.Limit)
		}
		fmt.Fprintf(opts.IO.ErrOut, "next: %s\n", safeText(next))
	}
	return nil
}

// RollbackOptions are the inputs of `manent rollback`.
type RollbackOptions struct {
	IO           *IOStreams
	Client       func() (*api.Client, error)
	Exporter     *Exporter
	Now          func() time.Time
	PollInterval time.Duration
	// FollowGrace is how long a server that stopped answering is asked
	// again with --wait (DefaultFollowGrace when 0).
	FollowGrace time.Duration

	Application string
	Environment string
	To          string
	Wait        bool
	// Quiet hides the progress of --wait on stderr.
	Quiet   bool
	Timeout time.Duration
	// IdempotencyKey is sent as Idempotency-Key; "" makes a fresh one for
	// this invocation.
	IdempotencyKey string
}

// NewCmdRollback builds `manent rollback`.
func NewCmdRollback(f *Factory, runF func(*RollbackOptions) error) *cobra.Command {
	opts := &RollbackOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now, PollInterval: f.PollInterval}
	cmd := &cobra.Command{
		Use:   "rollback <application> <environment> [--to VERSION] [--wait [-q] [--timeout <duration>]]",
		Short: "Deploy again the release that was current before the current one",
		Long: `Submit a new deploy of an earlier release with the descriptor it was deployed
with: by default the release that was current before the current one (the
latest SUCCESS deploy of another version), or with --to the latest SUCCESS
deploy of VERSION — also when the current release is a failed deploy of
VERSION that stayed live (an empty --to, such as --to "$UNSET", is a usage error,
exit 2, not the default; so is one no version can be, with a control
character or more than 256 characters). The new deploy goes through every submission check
(permissions as for a deploy, sources, environment configuration,
governance: freezes, promotion, approvals, change management) and records
rollback_of: the id of the current release's deploy, shown by 'status',
'history' and the API. A schedule.at or after of the old descriptor is
dropped: a rollback runs now. Without artifact.sha256 in the old descriptor
the rollback is pinned to the sha256 that release recorded: changed bytes
behind its URL fail the artifacts step.

The application and environment are names as in deploy.yml (lowercase
letters, digits and "-", starting with a letter or digit, at most 63
characters); any other is a usage error (exit 2) and nothing is sent.

When there is nothing to roll back to (no current release, no earlier
SUCCESS of another version, or VERSION never succeeded here) the server
answers 409 and the command exits 1. So it does while another deploy of the
environment is ENQUEUED or PENDING: it would run first and change the
current release under the rollback; wait for it or cancel it, then roll
back. That answer comes first: while such a deploy runs (a wave of it may
be live already) the server names it rather than saying there is nothing
to roll back to.

With --wait the command follows the new deploy like 'deploy --wait' (-q
hides the progress on stderr) and exits 0 if it ended SUCCESS, 1
otherwise, 3 on --timeout, 4 if the server is unreachable (a server that
stops answering once it has accepted the rollback is asked again for
--follow-grace, default 30s;
the deploy is kept on the server either way: it goes on there, or once
the server is back).

Like 'deploy', a rollback carries an Idempotency-Key, fresh for each
invocation unless --idempotency-key gives one: after a dropped connection
or a 503/429 it is sent again with the same key, and the server answers
the repeat with the deploy the first request created, never a second one.`,
		Example: `  manent rollback billing prod
  # deploy dpl_01J… submitted: ENQUEUED (1.4.1, rollback of dpl_01H…)

  manent rollback billing prod --to 1.3.0 --wait --timeout 15m

  # a CI job that may be re-run rolls back once
  manent rollback billing prod --idempotency-key "rollback-$CI_PIPELINE_ID"`,
		Args: exactArgs(2, "an application and an environment"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Exporter = f.Exporter()
			opts.FollowGrace = f.followGrace()
			opts.Application, opts.Environment = args[0], args[1]
			if err := checkEnvNames(opts.Application, opts.Environment); err != nil {
				return err
			}
			if cmd.Flags().Changed("to") && opts.To == "" {
				// Given but empty (--to "", a variable that is not set):
				// not the same as leaving --to out.
				return usageErrorf("--to needs a version (e.g. --to 1.3.0), got an empty one; leave --to out to roll back to the release before the current one")
			}
			if problem := descriptor.VersionProblem(opts.To); opts.To != "" && problem != "" {
				return usageErrorf("--to %s is not a version: %s", strconv.Quote(truncate(opts.To, 64)), problem)
			}
			if opts.Timeout < 0 {
				return usageErrorf("--timeout must not be negative")
			}
			if err := timeoutNeedsWait(cmd, opts.Wait); err != nil {
				return err
			}
			if err := checkIdempotencyKey(opts.IdempotencyKey); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return rollbackRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.To, "to", "", "the version to go back to (default: the release before the current one)")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "follow the new deploy until it is final")
	cmd.Flags().BoolVarP(&opts.Quiet, "quiet", "q", false, "with --wait: no progress on stderr (state, step, elapsed time)")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 30*time.Minute, "with --wait (refused without it), give up after this long (exit 3); 0 waits forever")
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key of the rollback (default: a fresh one per invocation)")
	return cmd
}

func rollbackRun(ctx context.Context, opts *RollbackOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	key := opts.IdempotencyKey
	if key == "" {
		key = newIdempotencyKey()
	}
	res, replayed, err := client.RollbackIdempotent(ctx, opts.Application, opts.Environment, api.RollbackRequest{To: opts.To}, key)
	if err != nil {
		again := "manent rollback " + opts.Application + " " + opts.Environment
		if opts.To != "" {
			again += " --to " + shellQuote(opts.To)
		}
		sayMaybeAccepted(opts.IO, err, "rollback", again+" --idempotency-key "+key)
		return err
	}
	if replayed && opts.IdempotencyKey != "" {
		// Our own retries replay silently; a key given again is worth saying.
		fmt.Fprintf(opts.IO.ErrOut, "notice: already rolled back with idempotency key %q: this is the first request's answer\n", key)
	}
	if res.Notice != "" {
		fmt.Fprintf(opts.IO.ErrOut, "notice: %s\n", safeLines(res.Notice))
	}
	line := fmt.Sprintf("deploy %s submitted: %s (%s, rollback of %s)\n", safeText(res.ID), opts.IO.State(string(res.State)),
		safeText(res.Version), safeText(res.RollbackOf))
	if !opts.Wait {
		if opts.Exporter != nil {
			return opts.Exporter.Write(opts.IO.Out, res)
		}
		_, err = fmt.Fprint(opts.IO.Out, line)
		return err
	}
	if !opts.Quiet {
		fmt.Fprint(opts.IO.ErrOut, line)
	}
	return followSubmitted(ctx, client, opts.IO, opts.Exporter, opts.Now, res.ID, res.State,
		watch{Interval: opts.PollInterval, Timeout: opts.Timeout, Grace: opts.FollowGrace}, opts.Quiet)
}

// DiffOptions are the inputs of `manent diff`.
type DiffOptions struct {
	IO        *IOStreams
	Client    func() (*api.Client, error)
	ReadInput func(name string) ([]byte, string, error)
	Exporter  *Exporter

	File string
}

// DiffResult is the `diff -o json` document.
type DiffResult struct {
	Application string `json:"application"`
	Environment string `json:"environment"`
	// Current is the current release (null before the first).
	Current *manent.Release `json:"current"`
	// Changed says the effective deploys differ.
	Changed bool `json:"changed"`
	// Diff is the unified diff of the two effective deploys as YAML.
	Diff      string         `json:"diff"`
	Effective map[string]any `json:"effective"`
	// CurrentEffective is the current release's effective deploy.
	CurrentEffective map[string]any `json:"current_effective"`
}

// NewCmdDiff builds `manent diff`.
func NewCmdDiff(f *Factory, runF func(*DiffOptions) error) *cobra.Command {
	opts := &DiffOptions{IO: f.IOStreams, Client: f.Client, ReadInput: f.ReadInput}
	cmd := &cobra.Command{
		Use:   "diff -f <file>",
		Short: "Show what a descriptor would change against the current release",
		Long: `Run the descriptor through every submission check without enqueueing it (as
'validate' does) and print, as a unified diff of YAML, its effective deploy
(the descriptor merged with the environment configuration) against the
effective deploy of the environment's current release. Lines starting with
"-" are the current release's, "+" the new deploy's.

Exit status: 0 no difference, 1 differences (like diff(1)), or the checks
refused the descriptor; 2 usage error; 4 server unreachable. Before the
first release of the environment everything is an addition.`,
		Example: `  manent diff -f deploy.yml
  manent diff -f deploy.yml -o json | jq -r .diff`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Exporter = f.Exporter()
			if runF != nil {
				return runF(opts)
			}
			return diffRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.File, "file", "f", "", "descriptor to compare (- reads stdin)")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "yml", "yaml", "json")
	return cmd
}

func diffRun(ctx context.Context, opts *DiffOptions) error {
	data, name, err := opts.ReadInput(opts.File)
	if err != nil {
		return err
	}
	d, err := descriptor.Parse(data)
	if err != nil {
		return inFile(name, err)
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	sub, err := client.Submit(ctx, data, true)
	if err != nil {
		return inFile(name, err)
	}
	res := DiffResult{Application: d.Application, Environment: d.Environment, Effective: sub.Effective}
	cur, err := client.Current(ctx, d.Application, d.Environment)
	switch {
	case manent.ErrorCode(err) == manent.ENotFound:
		// No release yet: everything is new.
	case err != nil:
		return err
	default:
		res.Current, res.CurrentEffective = cur.Release, cur.Effective
	}
	from, err := effectiveYAML(res.CurrentEffective)
	if err != nil {
		return err
	}
	to, err := effectiveYAML(res.Effective)
	if err != nil {
		return err
	}
	fromName := fmt.Sprintf("current %s/%s", d.Application, d.Environment)
	if res.Current != nil {
		fromName += fmt.Sprintf(" %s (%s)", res.Current.Version, res.Current.DeploymentID)
	} else {
		fromName += " (no release yet)"
	}
	res.Diff = unifiedDiff(fromName, fmt.Sprintf("new %s/%s %s", d.Application, d.Environment, d.Version), from, to, 3)
	res.Changed = res.Diff != ""
	if opts.Exporter != nil {
		if err := opts.Exporter.Write(opts.IO.Out, res); err != nil {
			return err
		}
	} else if !res.Changed {
		fmt.Fprintf(opts.IO.ErrOut, "no difference with the current release of %s/%s\n", safeText(d.Application), safeText(d.Environment))
	} else if _, err := fmt.Fprint(opts.IO.Out, colorDiff(opts.IO, safeLines(res.Diff))); err != nil {
		return err
	}
	if res.Changed {
		return &SilentError{Code: ExitFailed}
	}
	return nil
}

// effectiveYAML renders an effective deploy as YAML with sorted keys.
func effectiveYAML(eff map[string]any) (string, error) {
	if len(eff) == 0 {
		return "", nil
	}
	b, err := yaml.Marshal(eff)
	if err != nil {
		return "", fmt.Errorf("render the effective deploy: %w", err)
	}
	return string(b), nil
}

// colorDiff colours removed and added lines on a colour terminal.
func colorDiff(s *IOStreams, diff string) string {
	if !s.ColorEnabled() {
		return diff
	}
	lines := splitLines(diff)
	for i, l := range lines {
		switch {
		case len(l) > 0 && l[0] == '@':
			lines[i] = s.Faint(l)
		case i < 2:
			lines[i] = s.Bold(l)
		case len(l) > 0 && l[0] == '-':
			lines[i] = s.style().Foreground(lipgloss.Color("1")).Render(l)
		case len(l) > 0 && l[0] == '+':
			lines[i] = s.style().Foreground(lipgloss.Color("2")).Render(l)
		}
	}
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}

// DORAOptions are the inputs of `manent dora`.
type DORAOptions struct {
	IO       *IOStreams
	Client   func() (*api.Client, error)
	Exporter *Exporter

	Application string
	Environment string
	Window      string
}

// NewCmdDORA builds `manent dora`.
func NewCmdDORA(f *Factory, runF func(*DORAOptions) error) *cobra.Command {
	opts := &DORAOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "dora [--application A] [--environment E] [--window 30d]",
		Short: "Show the four DORA metrics",
		Long: `Show the four DORA metrics over the deploys that ran (ended SUCCESS, ERROR or
MAX_RECOVERY_ATTEMPTS_EXCEEDED, or CANCELLED after an activation) and finished
within the window:

  deployment frequency   how many, and per day of the window
  lead time              from the descriptor's source.committed_at to the end of
                         each SUCCESS deploy that has a source block (median, p90)
  change failure rate    failed (ERROR, MAX_RECOVERY_ATTEMPTS_EXCEEDED, CANCELLED
                         after an activation) / all
  time to restore        from each failed deploy's end to the next SUCCESS in
                         the same application/environment, or to the end of its
                         own automatic rollback when that completed (median);
                         failures nothing restored yet are counted apart

A deploy that failed before it reached the environment (at config, secrets,
artifacts, qa, a checkpoint or a wave's approval, with no other step run), or
that was cancelled before any activation of it completed, is neither a deploy
nor a failure: it changed nothing there.

A figure without samples is "-" (null in -o json), never 0. The window is a
number of hours, days or weeks: 12h, 30d, 4w. Without --application and
--environment, the deploys of every environment you may read are counted; an
--application or --environment your token may read nowhere is refused (403),
not counted as zero deploys.
With the server's retention.deploys set, a window reaching further back than
it counts only the deploys still kept (the current and previous releases, the
last failures): the figures for that part are not the history's, and the
answer says so ("Partial:", "partial" in -o json) with the newest end of a
deploy retention removed.`,
		Example: `  manent dora --application billing --environment prod
  manent dora --window 7d -o json | jq .change_failure_rate.rate`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFilterNames(opts.Application, opts.Environment); err != nil {
				return err
			}
			if _, err := api.ParseDORAWindow(opts.Window); err != nil {
				return usageErrorf("--window: %s", manent.ErrorMessage(err))
			}
			opts.Exporter = f.Exporter()
			if runF != nil {
				return runF(opts)
			}
			return doraRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Application, "application", "", "only this application")
	cmd.Flags().StringVar(&opts.Environment, "environment", "", "only this environment")
	cmd.Flags().StringVar(&opts.Window, "window", "30d", "how far back: <n>h, <n>d or <n>w")
	return cmd
}

func doraRun(ctx context.Context, opts *DORAOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	res, err := client.DORA(ctx, api.DORAOptions{Application: opts.Application, Environment: opts.Environment, Window: opts.Window})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, res)
	}
	return renderDORA(opts.IO, res)
}

// renderDORA prints the four DORA figures as fields.
func renderDORA(s *IOStreams, res *api.DORA) error {
	scope := "every environment"
	if res.Application != "" || res.Environment != "" {
		scope = orAll(res.Application) + "/" + orAll(res.Environment)
	}
	f := s.NewFields()
	f.Add("Scope", fmt.Sprintf("%s, last %s", scope, res.Window))
	f.Add("Deployment frequency", fmt.Sprintf("%s, %s per day", manent.Plural(res.DeploymentFrequency.Deploys, "deploy"),
		strconv.FormatFloat(res.DeploymentFrequency.PerDay, 'f', -1, 64)))
	lead := fmt.Sprintf("median %s, p90 %s (%s)", secondsOrDash(res.LeadTimeSeconds.Median),
		secondsOrDash(res.LeadTimeSeconds.P90), manent.Plural(res.LeadTimeSeconds.Samples, "sample"))
	if res.LeadTimeSeconds.Samples == 0 && res.DeploymentFrequency.Deploys > 0 {
		// The usual reason, which the numbers alone do not tell.
		lead += ": no SUCCESS deploy gave source.committed_at"
	}
	f.Add("Lead time", lead)
	rate := "-"
	if r := res.ChangeFailureRate.Rate; r != nil {
		rate = percent(*r)
	}
	f.Add("Change failure rate", fmt.Sprintf("%s (%d failed of %d)", rate, res.ChangeFailureRate.Failed, res.ChangeFailureRate.Total))
	restore := fmt.Sprintf("median %s (%s)", secondsOrDash(res.TimeToRestoreSeconds.Median), manent.Plural(res.TimeToRestoreSeconds.Samples, "sample"))
	if n := res.TimeToRestoreSeconds.Unrestored; n > 0 {
		// An outage still open gives no sample: say so, or the median
		// reads as all there is.
		restore += fmt.Sprintf("; %s not restored yet", manent.Plural(n, "failure"))
	}
	f.Add("Time to restore", restore)
	if res.Partial != nil {
		f.Add("Partial", res.Partial.Message)
	}
	return f.RenderTo(s.Out)
}

// percent prints a ratio as a percentage with one decimal, without a
// trailing ".0": 0.333 is "33.3%" (not the float product 33.300000000000004),
// 0.5 is "50%".
func percent(r float64) string {
	return strings.TrimSuffix(strconv.FormatFloat(r*100, 'f', 1, 64), ".0") + "%"
}

func orAll(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

// secondsOrDash prints a number of seconds as a duration, "-" for null.
func secondsOrDash(s *float64) string {
	if s == nil {
		return "-"
	}
	return formatDuration(time.Duration(*s * float64(time.Second)))
}
