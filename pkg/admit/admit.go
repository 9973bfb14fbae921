package admit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/cronspec"
	"github.com/manent-io/manent/pkg/envconfig"
	"github.com/manent-io/manent/pkg/governance"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/pkg/suggest"
	"github.com/manent-io/manent/pkg/urlpolicy"
)

// Authorizer decides RBAC (check 2). The server's guard is one.
type Authorizer interface {
	Authorize(id manent.Identity, permission, application, environment string) error
}

// Tokens are the server's static tokens (auth.Authenticator).
type Tokens interface {
	TokenGroups(name string) ([]string, bool)
}

// Config configures admission. Its fields are the server configuration
// keys the checks read.
type Config struct {
	// Store answers what earlier deploys did (`after`, promotion, the
	// current release) and records the break-glass audit entry.
	Store *store.Store
	// Authorizer checks permissions (nil: everything is allowed, for tests
	// of the later checks only).
	Authorizer Authorizer
	// Tokens, when set, answers for a static token subject ("token:<name>")
	// whether the token is still configured, and its groups now: a
	// recurring schedule's tick deploys as its creator only while the
	// creator's token exists (nil: not checked).
	Tokens Tokens
	// Plugins are the registered plugins: a target or custom step naming
	// another one is refused (nil: not checked).
	Plugins *plugin.Registry
	// Sources is artifacts.sources.
	Sources urlpolicy.Sources
	// Callbacks is callbacks.allow; CallbacksSigned says a signing secret is
	// configured (without one, descriptors with callbacks are refused).
	Callbacks       urlpolicy.Callbacks
	CallbacksSigned bool
	// ChatChannels are the chat channels configured on the server.
	ChatChannels []string
	// Environments gives the environment configuration (nil: none).
	Environments envconfig.Provider
	// Governance decides freezes, promotion, approvals and change
	// management (nil: everything allowed).
	Governance governance.Decider
	// ChangeManagement says an ITSM provider is configured.
	ChangeManagement bool
	// Pipeline is pipeline.steps (empty: manent.DefaultPipeline).
	Pipeline []string
	// ScheduleMinInterval is schedules.min_interval: a recurring schedule
	// that fires more often is refused (0: DefaultScheduleMinInterval).
	ScheduleMinInterval time.Duration
	// SchedulesPerEnvironment is schedules.max_per_environment: the most
	// recurring schedules one application/environment may have (0:
	// DefaultSchedulesPerEnvironment).
	SchedulesPerEnvironment int
	// StepPlugins is plugins.steps: the plugins custom steps may use
	// (SPEC §11.1; empty: none). Local trial mode allows every plugin.
	StepPlugins []string
	// ServerEnv names the environment variables that hold the server's own
	// secrets besides MANENT_*, each with the configuration key that names
	// it (callbacks.secret_env, itsm.token_env): a descriptor's secret may
	// name none of them (checkSecrets).
	ServerEnv map[string]string
	// SecretFilesUnder is secrets.files_under: the directories a
	// descriptor's file: secrets must be under (empty: anywhere).
	SecretFilesUnder []string
	// SecretEnv lists the variables a descriptor's env: secrets may name
	// (exact names, or a prefix ending in `*`; empty: none), and
	// SecretEnvFrom the key it comes from (secrets.env, or
	// plugins.pass_env when secrets.env is unset), named by a refusal.
	// Local trial mode allows any variable but the server's own.
	SecretEnv     []string
	SecretEnvFrom string
	// Trial is local trial mode (SPEC §8.1): the local target under
	// TargetsDir/<application>/<environment> and rollback enabled where the
	// environment configuration says nothing.
	Trial      bool
	TargetsDir string
	// Worker is this worker's executor id, recorded in each deploy it
	// admits (plan.Input.Worker). Shared says several workers may share
	// the database (PostgreSQL): a refusal that depends on this worker's
	// configuration then names it, not "this server".
	Worker string
	Shared bool
	Logger *slog.Logger
}

// DefaultScheduleMinInterval is schedules.min_interval when unset.
const DefaultScheduleMinInterval = time.Minute

// DefaultSchedulesPerEnvironment is schedules.max_per_environment when
// unset.
const DefaultSchedulesPerEnvironment = 25

// Admitter runs the submission checks.
type Admitter struct {
	cfg Config
	log *slog.Logger
}

// New returns an Admitter, or a configuration error (an unknown step in
// pipeline.steps, say) that must stop the server from starting.
func New(cfg Config) (*Admitter, error) {
	if cfg.Store == nil {
		return nil, errors.New("admit: no store")
	}
	if err := CheckPipeline(cfg.Pipeline); err != nil {
		return nil, err
	}
	if err := checkStepPlugins(cfg.StepPlugins, cfg.Plugins); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ScheduleMinInterval < 0 {
		return nil, fmt.Errorf("schedules.min_interval must not be negative, got %s", cfg.ScheduleMinInterval)
	}
	if cfg.ScheduleMinInterval == 0 {
		cfg.ScheduleMinInterval = DefaultScheduleMinInterval
	}
	if cfg.SchedulesPerEnvironment < 0 {
		return nil, fmt.Errorf("schedules.max_per_environment must not be negative, got %d", cfg.SchedulesPerEnvironment)
	}
	if cfg.SchedulesPerEnvironment == 0 {
		cfg.SchedulesPerEnvironment = DefaultSchedulesPerEnvironment
	}
	if cfg.Trial && cfg.TargetsDir != "" {
		abs, err := filepath.Abs(cfg.TargetsDir)
		if err != nil {
			return nil, fmt.Errorf("admit: targets dir: %w", err)
		}
		cfg.TargetsDir = abs
	}
	return &Admitter{cfg: cfg, log: cfg.Logger}, nil
}

// CheckPipeline checks pipeline.steps: built-in step names only
// (manent.DefaultPipeline), each once, with `deploy`, and in an order the
// engine can run (artifacts before qa and deploy, activation after deploy).
func CheckPipeline(steps []string) error {
	if len(steps) == 0 {
		return nil
	}
	pos := map[string]int{}
	for i, s := range steps {
		if !slices.Contains(manent.DefaultPipeline, s) {
			return fmt.Errorf("pipeline.steps[%d]: unknown step %q (the built-in steps are %s)", i, s, strings.Join(manent.DefaultPipeline, ", "))
		}
		if _, dup := pos[s]; dup {
			return fmt.Errorf("pipeline.steps[%d]: step %q is listed twice", i, s)
		}
		pos[s] = i
	}
	before := func(a, b string) error {
		ia, okA := pos[a]
		ib, okB := pos[b]
		if okA && okB && ia > ib {
			return fmt.Errorf("pipeline.steps: %q must come before %q", a, b)
		}
		return nil
	}
	if _, ok := pos[manent.StepDeploy]; !ok {
		return fmt.Errorf("pipeline.steps must include %q", manent.StepDeploy)
	}
	return errors.Join(
		before(manent.StepArtifacts, manent.StepQA),
		before(manent.StepArtifacts, manent.StepDeploy),
		before(manent.StepDeploy, manent.StepPostTest),
		before(manent.StepDeploy, manent.StepActivation),
	)
}

// checkStepPlugins checks plugins.steps: each name a registered step plugin,
// so that a typo stops the server instead of refusing every deploy.
func checkStepPlugins(names []string, reg *plugin.Registry) error {
	var errs []error
	for i, n := range names {
		if reg == nil {
			break
		}
		if _, err := reg.Runner(n); err != nil {
			errs = append(errs, fmt.Errorf("plugins.steps[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// stepAllowed says whether custom steps may use plugin name (SPEC §11.1).
func (a *Admitter) stepAllowed(name string) bool {
	return a.cfg.Trial || slices.Contains(a.cfg.StepPlugins, name)
}

// targetCommands refuses a descriptor that gives its own target (or part
// of it) when that target plugin is also a step plugin that plugins.steps
// does not list: such a plugin (script) runs the command its settings
// name, so a descriptor choosing it would run any command on the server,
// round the allow-list custom steps obey (SPEC §11.1). A target the
// environment configuration alone gives is the operators' choice and
// stays allowed. It returns the problem's message, or "".
func (a *Admitter) targetCommands(d *descriptor.Descriptor, name string) string {
	if d.Target == nil || a.stepAllowed(name) || a.cfg.Plugins == nil {
		return ""
	}
	if _, err := a.cfg.Plugins.Runner(name); err != nil {
		return ""
	}
	return fmt.Sprintf("target %q runs the commands its settings name: a descriptor may choose or set it only when plugins.steps lists %q on %s (it does not); ask the operators, or let the environment configuration give the target", name, name, a.here())
}

// Request is a deploy to admit.
type Request struct {
	Descriptor *descriptor.Descriptor
	Identity   manent.Identity
	// DryRun checks deployment.dry-run instead of deployment.submit (and
	// records nothing).
	DryRun bool
	// ID is the deploy id to give it (empty: a new one).
	ID string
	// RequestID ties audit entries to the request.
	RequestID string
	// RollbackOf is set by a rollback (SPEC §11.5): the deploy of the
	// current release it goes back from, and RollbackFrom the deploy whose
	// release it deploys again. They change no check.
	RollbackOf   string
	RollbackFrom string
	// Tick is set by a cron tick (Tick): a refusal is recorded on the
	// schedule, and says nothing of submitting again.
	Tick bool
}

// Admission is an admitted deploy: what to run and the decision.
type Admission struct {
	Input    plan.Input
	Decision *manent.Decision
}

// Admit runs checks 2 to 6 on a deploy. Every problem of one check is
// reported at once, as one *manent.Error (EInvalid) with field errors;
// a missing permission is EForbidden.
func (a *Admitter) Admit(ctx context.Context, req Request) (*Admission, error) {
	d := req.Descriptor
	perm := auth.DeploymentSubmit
	if req.DryRun {
		perm = auth.DeploymentDryRun
	}
	if err := a.authorize(req.Identity, perm, d); err != nil {
		return nil, err
	}
	// A dry run of a recurring deploy checks what creating the schedule
	// does (AdmitSchedule): governance is decided at each tick, and a
	// freeze now must not refuse a schedule the submission would create.
	recurring := d.Schedule != nil && d.Schedule.Cron != ""
	return a.admit(ctx, req, !(req.DryRun && recurring))
}

// AdmitSchedule checks a recurring deploy (schedule.cron) when it is
// created: permissions (deployment.submit and schedule.manage), checks 3, 4
// and the plan now; governance runs at each tick (Tick).
func (a *Admitter) AdmitSchedule(ctx context.Context, req Request) (*Admission, error) {
	d := req.Descriptor
	if err := a.authorize(req.Identity, auth.DeploymentSubmit, d); err != nil {
		return nil, err
	}
	if err := a.authorize(req.Identity, auth.ScheduleManage, d); err != nil {
		return nil, err
	}
	return a.admit(ctx, req, false)
}

func (a *Admitter) authorize(id manent.Identity, perm auth.Permission, d *descriptor.Descriptor) error {
	if a.cfg.Authorizer == nil {
		return nil
	}
	return a.cfg.Authorizer.Authorize(id, string(perm), d.Application, d.Environment)
}

// Problems runs, on a descriptor with problems of its own
// (descriptor.ParseAll), the checks that do not need it whole — artifact
// source and callback URLs, the commit time, the environment
// configuration, the plugins and their settings — after the permission
// Admit checks, and returns what they find (clipped as a refusal's, not
// bounded in number: descriptor.Merge bounds the whole). Governance, the
// schedule and the plan wait for a valid descriptor: the plan would only
// repeat a misplaced step, and governance decides on a deploy that can run.
// The server adds these problems to the descriptor's own, so that one
// answer lists them all (SPEC §2).
func (a *Admitter) Problems(ctx context.Context, req Request) ([]manent.FieldError, error) {
	d := req.Descriptor
	perm := auth.DeploymentSubmit
	if req.DryRun {
		perm = auth.DeploymentDryRun
	}
	if err := a.authorize(req.Identity, perm, d); err != nil {
		return nil, err
	}
	// What a plugin could not decide is left out: the descriptor is
	// refused for its own problems anyway, and is asked again once fixed.
	_, problems, _ := a.independent(ctx, d)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range problems {
		problems[i].Path = manent.ClipText(problems[i].Path, maxProblemText)
		problems[i].Message = manent.ClipText(problems[i].Message, 2*maxProblemText)
	}
	return problems, nil
}

// independent runs the checks that need no plan: 3 (sources, callback
// URLs), the commit time, 4 (environment configuration) and the plugins.
// undecided is the 503 of the plugins that could not decide whether their
// settings are valid (nil: every one did).
func (a *Admitter) independent(ctx context.Context, d *descriptor.Descriptor) (_ envResult, _ []manent.FieldError, undecided error) {
	// 3. Sources and callback URLs.
	problems := a.checkURLs(ctx, d)
	problems = append(problems, checkCommitTime(d, time.Now())...)
	// 4. Environment configuration, merged under the descriptor policy.
	env := a.environment(ctx, d)
	problems = append(problems, env.problems...)
	// The plugins the deploy names must exist and accept their settings.
	// The target is the environment's as much as the descriptor's: with
	// problems in the environment it is not known. The custom steps are
	// the descriptor's alone: checked anyway, so that a mistyped plugin
	// is not hidden until the environment's problems are fixed.
	var plugins []manent.FieldError
	var pending []error
	if len(env.problems) == 0 {
		plugins, pending = a.checkTarget(ctx, d, env.target, env.config, env.checked)
	}
	steps, stepsPending := a.checkSteps(ctx, d)
	problems = append(problems, plugins...)
	problems = append(problems, steps...)
	problems = append(problems, a.checkSecrets(d)...)
	return env, problems, undecidedError(undecidedLead, append(pending, stepsPending...))
}

func (a *Admitter) admit(ctx context.Context, req Request, governed bool) (*Admission, error) {
	d := req.Descriptor
	// 3–4 and the plugins; how often a recurring deploy fires.
	env, problems, undecided := a.independent(ctx, d)
	sched, err := a.checkSchedule(ctx, d)
	if err != nil {
		return nil, err
	}
	problems = append(problems, sched...)
	// 6. Plan.
	pl, err := plan.Build(d, a.cfg.Pipeline)
	if err != nil {
		problems = append(problems, manent.FieldError{Path: "/steps", Message: err.Error()})
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, refused(problems)
	}
	if undecided != nil {
		return nil, undecided
	}
	// 5. Governance.
	waves := plan.WavesOf(d.Rollout)
	decision, waits := &manent.Decision{Allowed: true, Source: "at each tick"}, plan.Waits{}
	var successes []string
	if governed {
		var refusals []manent.FieldError
		var err error
		decision, waits, refusals, successes, err = a.decide(ctx, req, plan.FreezeRegions(waves), env.config, env.target)
		if err != nil {
			return nil, err
		}
		if len(refusals) > 0 {
			return nil, refused(refusals)
		}
	}
	id := req.ID
	if id == "" {
		id = manent.NewDeploymentID()
	}
	in := plan.Input{
		ID: id, Application: d.Application, Environment: d.Environment, Version: d.Version,
		Requester: req.Identity.Subject, RequesterGroups: req.Identity.Groups,
		Descriptor: d, Plan: pl, Target: env.target, Parameters: env.parameters, Rollback: env.rollback,
		Waves: waves, EnvChecked: env.checked, EnvRevision: env.revision, Notice: env.notice,
		Effective: env.effective, EnvConfig: env.config, Waits: waits, RollbackOf: req.RollbackOf, RollbackFrom: req.RollbackFrom, Worker: a.cfg.Worker,
		Successes: successes,
	}
	return &Admission{Input: in, Decision: decision}, nil
}

// commitClockSkew is how far in the future source.committed_at may be:
// the CI machine's clock and the server's differ a little.
const commitClockSkew = 5 * time.Minute

// checkCommitTime refuses a source.committed_at in the future: DORA's lead
// time runs from it to the deploy's end, and a commit cannot come after
// its deploy.
func checkCommitTime(d *descriptor.Descriptor, now time.Time) []manent.FieldError {
	at, ok := d.Source.CommitTime()
	if !ok || !at.After(now.Add(commitClockSkew)) {
		return nil
	}
	return []manent.FieldError{{Path: "/source/committed_at", Message: fmt.Sprintf(
		"%s is in the future (the server's clock says %s): give the commit's own time, e.g. git show -s --format=%%cI",
		d.Source.CommittedAt, now.UTC().Format(time.RFC3339))}}
}

// maxProblems is the most field errors of a refusal, as descriptor.Parse
// returns at most 100: a plugin's `with` of 70,000 unknown keys (1 MiB)
// would otherwise be answered with 70,000 problems (9 MB). Past it the last
// one says how many more there are. maxProblemText bounds a problem's path
// and message, which may quote a key of any length.
const (
	maxProblems    = 100
	maxProblemText = 512
)

// undecidedError is the 503 of the plugins that could not decide whether
// their settings are valid (plugin.UndecidedError), each led by where it
// is: not the descriptor's fault, so no 422 (a CI job does not retry one),
// nothing stored, and a Retry-After; nil when there are none.
func undecidedError(lead string, pending []error) error {
	if len(pending) == 0 {
		return nil
	}
	var retry time.Duration
	msgs := make([]string, len(pending))
	for i, err := range pending {
		msgs[i] = manent.ClipText(err.Error(), 2*maxProblemText)
		if u := plugin.AsUndecided(err); u != nil {
			retry = max(retry, u.RetryAfter)
		}
	}
	retry = max(retry, time.Second)
	return &manent.Error{Code: manent.EUnavailable, RetryAfter: retry,
		Message: fmt.Sprintf("%s: %s (retry in %s)", lead, strings.Join(msgs, "; "), retry)}
}

// undecidedLead leads the 503 of a submission (and of a dry run) whose
// plugins could not decide.
const undecidedLead = "the deploy could not be checked, and nothing was stored"

// refused is the 422 of a check that found problems.
func refused(problems []manent.FieldError) error {
	total := len(problems)
	if total > maxProblems {
		problems = append(problems[:maxProblems-1:maxProblems-1], manent.FieldError{
			Message: fmt.Sprintf("… and %d more problems not shown: fix these and validate again", total-maxProblems+1)})
	}
	for i := range problems {
		problems[i].Path = manent.ClipText(problems[i].Path, maxProblemText)
		problems[i].Message = manent.ClipText(problems[i].Message, 2*maxProblemText)
	}
	noun := "problems"
	if total == 1 {
		noun = "problem"
	}
	return &manent.Error{Code: manent.EInvalid,
		Message: fmt.Sprintf("the deploy was refused: %d %s", total, noun), Fields: problems}
}

// SchedulesPerEnvironment is the most recurring schedules one
// application/environment may have (schedules.max_per_environment).
func (a *Admitter) SchedulesPerEnvironment() int { return a.cfg.SchedulesPerEnvironment }

// ScheduleLimitError is the refusal, as any other of admission's, of a
// schedule past SchedulesPerEnvironment.
func (a *Admitter) ScheduleLimitError(app, env string) error {
	return refused([]manent.FieldError{a.scheduleLimitProblem(app, env)})
}

func (a *Admitter) scheduleLimitProblem(app, env string) manent.FieldError {
	return manent.FieldError{Path: "/schedule/cron", Message: fmt.Sprintf(
		"%s/%s has %d recurring schedules, the most %s allows (schedules.max_per_environment): delete one first (manent schedules delete <id>)",
		app, env, a.cfg.SchedulesPerEnvironment, a.here())}
}

// here names this server in a refusal that depends on its configuration:
// "worker <id>" when several workers share the database, whose
// configurations may differ, else "this server".
func (a *Admitter) here() string {
	if a.cfg.Shared && a.cfg.Worker != "" {
		return "worker " + a.cfg.Worker
	}
	return "this server"
}

// checkSchedule refuses a recurring schedule that fires more often than
// schedules.min_interval (SPEC §11.1), or one past
// schedules.max_per_environment: each tick is a deploy, and a submitter
// could otherwise fill the queue with schedules created over time. A count
// that cannot be read is an error (a storage fault stays one: 503), not a
// schedule within the limit.
func (a *Admitter) checkSchedule(ctx context.Context, d *descriptor.Descriptor) ([]manent.FieldError, error) {
	if d.Schedule == nil || d.Schedule.Cron == "" {
		return nil, nil
	}
	spec, err := cronspec.Parse(d.Schedule.Cron)
	if err != nil {
		// Parse refuses it first; a descriptor built in Go may not have been.
		return []manent.FieldError{{Path: "/schedule/cron", Message: fmt.Sprintf("invalid cron expression %q: %v", d.Schedule.Cron, err)}}, nil
	}
	if every, limit := spec.MinInterval(), a.cfg.ScheduleMinInterval; every < limit {
		return []manent.FieldError{{Path: "/schedule/cron", Message: fmt.Sprintf(
			"%q fires every %s, more often than %s allows (schedules.min_interval: %s)", d.Schedule.Cron, short(every), a.here(), short(limit))}}, nil
	}
	// Checked again when the schedule is recorded (store.InsertSchedule);
	// here, so that a dry run says it too.
	n, err := a.cfg.Store.ActiveSchedules(ctx, d.Application, d.Environment)
	if err != nil {
		return nil, fmt.Errorf("count the recurring schedules of %s/%s: %w", d.Application, d.Environment, err)
	}
	if n >= a.cfg.SchedulesPerEnvironment {
		return []manent.FieldError{a.scheduleLimitProblem(d.Application, d.Environment)}, nil
	}
	same, err := a.SameSchedule(ctx, nil, d.Application, d.Environment, d.Schedule.Cron, "")
	if err != nil || same == nil {
		return nil, err
	}
	return []manent.FieldError{*same}, nil
}

// SameSchedule refuses a schedule of app/env whose expression fires at
// the times of one of their live schedules other than except
// (cronspec.SameTimes): both would deploy at each tick, twice the same
// descriptor when it was submitted twice (a CI job run again). It returns
// the problem, naming that schedule, or nil. Admission asks (a dry run
// says it too), and again the transaction that records the schedule, tx
// (store.ActiveSchedulesOf): two submissions at once.
func (a *Admitter) SameSchedule(ctx context.Context, tx *sql.Tx, app, env, expr, except string) (*manent.FieldError, error) {
	spec, err := cronspec.Parse(expr)
	if err != nil {
		return nil, nil // refused as it is by checkSchedule
	}
	live, err := a.cfg.Store.ActiveSchedulesOf(ctx, tx, app, env)
	if err != nil {
		return nil, fmt.Errorf("read the recurring schedules of %s/%s: %w", app, env, err)
	}
	for _, sc := range live {
		if sc.ID == except {
			continue
		}
		if other, err := cronspec.Parse(sc.Cron); err != nil || !spec.SameTimes(other) {
			continue
		}
		return &manent.FieldError{Path: "/schedule/cron", Message: fmt.Sprintf(
			"%s/%s has schedule %s firing at the same times (%q, created by %s): each tick would deploy twice; delete it first to replace it (manent schedules delete %s)",
			app, env, sc.ID, sc.Cron, sc.Requester, sc.ID)}, nil
	}
	return nil, nil
}

// SameScheduleError is the refusal of SameSchedule's problem, as any
// other of admission's.
func (a *Admitter) SameScheduleError(fe manent.FieldError) error {
	return refused([]manent.FieldError{fe})
}

// short writes a duration without its zero minutes and seconds: 1m, 24h.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// checkURLs is check 3: the artifact source, callback URLs and chat channels.
func (a *Admitter) checkURLs(ctx context.Context, d *descriptor.Descriptor) []manent.FieldError {
	problems := fieldErrors(a.cfg.Sources.Allowed(d.Artifact.URL), "/artifact/url")
	if len(d.Callbacks) > 0 {
		urls := make([]string, len(d.Callbacks))
		for i, c := range d.Callbacks {
			urls[i] = c.URL
		}
		problems = append(problems, fieldErrors(a.cfg.Callbacks.CheckAll(ctx, urls), "/callbacks")...)
		if !a.cfg.CallbacksSigned {
			problems = append(problems, manent.FieldError{Path: "/callbacks",
				Message: a.here() + " has no callback signing secret (callbacks.secret_env): callbacks would go unsigned"})
		}
	}
	if d.Notify != nil {
		for i, ch := range d.Notify.Chat {
			if !slices.Contains(a.cfg.ChatChannels, ch) {
				problems = append(problems, manent.FieldError{Path: fmt.Sprintf("/notify/chat/%d", i),
					Message: fmt.Sprintf("chat channel %q is not configured on %s (known: %s)", ch, a.here(), knownChannels(a.cfg.ChatChannels))})
			}
		}
	}
	return problems
}

// checkPlugins checks that the target and every custom step name a
// registered plugin that accepts its settings, and that custom steps use
// only the plugins of plugins.steps (SPEC §11.1). Without the environment's
// answer (checked false) a missing target is left to the config step.
// pending are the errors of the plugins that could not decide
// (plugin.UndecidedError), each led by the target or step it is.
func (a *Admitter) checkPlugins(ctx context.Context, d *descriptor.Descriptor, target descriptor.Target, envConfig map[string]any, checked bool) (problems []manent.FieldError, pending []error) {
	problems, pending = a.checkTarget(ctx, d, target, envConfig, checked)
	steps, stepsPending := a.checkSteps(ctx, d)
	return append(problems, steps...), append(pending, stepsPending...)
}

// checkTarget is checkPlugins for the target; envConfig is the
// environment configuration as read (ConfigDocument; nil: none read). A
// check that runs a process (plugin.ContextValidator) ends with ctx.
func (a *Admitter) checkTarget(ctx context.Context, d *descriptor.Descriptor, target descriptor.Target, envConfig map[string]any, checked bool) (problems []manent.FieldError, pending []error) {
	reg := a.cfg.Plugins
	switch {
	case reg == nil:
		// Nothing registered to check against.
	case target.Plugin != "":
		t, err := reg.Target(target.Plugin)
		percent := d.Rollout != nil && len(d.Rollout.Percentages) > 0
		validate := func() error { return plugin.Validate(ctx, t, target.With) }
		honours := func() error { return plugin.HonoursPercentages(t, target.With) }
		if pv, ok := t.(plugin.PercentValidator); ok && percent {
			// One check answers both (an external plugin's validate).
			var percentErr error
			validate = func() (err error) { err, percentErr = pv.ValidatePercentages(ctx, target.With); return err }
			honours = func() error { return percentErr }
		}
		if err != nil {
			problems = append(problems, manent.FieldError{Path: "/target/plugin", Message: err.Error()})
		} else if err := validate(); plugin.AsUndecided(err) != nil {
			pending = append(pending, fmt.Errorf("/target/with: target %s: %w", target.Plugin, err))
		} else if err != nil {
			problems = append(problems, withProblems("/target/with", "target "+target.Plugin, "target "+target.Plugin, err)...)
		} else if err := checkOwner(t, d, target.With); err != nil {
			problems = append(problems, withProblems("/target/with", "target "+target.Plugin, "target "+target.Plugin, err)...)
		} else if err := checkEnvironment(t, d, target, envConfig); err != nil {
			problems = append(problems, withProblems("/target/with", "target "+target.Plugin, "target "+target.Plugin, err)...)
		} else if msg := a.targetCommands(d, target.Plugin); msg != "" {
			problems = append(problems, manent.FieldError{Path: "/target/plugin", Message: msg})
		} else if percent {
			// SPEC §11.6: never a silent full deploy for a percentage.
			if err := honours(); plugin.AsUndecided(err) != nil {
				pending = append(pending, fmt.Errorf("/rollout/percentages: target %s: %w", target.Plugin, err))
			} else if err != nil {
				problems = append(problems, manent.FieldError{Path: "/rollout/percentages",
					Message: fmt.Sprintf("target %s cannot honour a percentage rollout: %v", target.Plugin, err)})
			}
		} else if tc, ok := t.(plugin.TargetCheck); ok && d.Rollout != nil && len(d.Rollout.Waves) > 0 {
			var all []string
			for _, w := range d.Rollout.Waves {
				all = append(all, w.Targets...)
			}
			if err := tc.CheckTargets(all); err != nil {
				problems = append(problems, manent.FieldError{Path: "/rollout/waves",
					Message: fmt.Sprintf("target %s: %v", target.Plugin, err)})
			}
		}
	case checked:
		problems = append(problems, manent.FieldError{Path: "/target",
			Message: "no target: the descriptor names none and the environment configuration gives none"})
	}
	return problems, pending
}

// checkOwner asks a target that belongs to one application and
// environment (plugin.OwnerCheck) whether it is d's.
func checkOwner(t plugin.Target, d *descriptor.Descriptor, with map[string]any) error {
	oc, ok := t.(plugin.OwnerCheck)
	if !ok {
		return nil
	}
	var targets []string
	if d.Rollout != nil {
		for _, w := range d.Rollout.Waves {
			targets = append(targets, w.Targets...)
		}
	}
	return oc.CheckOwner(d.Application, d.Environment, with, targets)
}

// checkEnvironment asks a target whose places the server keeps to some
// environments (plugin.EnvironmentCheck) whether d's environment may use
// the one target names. What the environment configuration itself gives
// that plugin (envConfig's target.with) is the operator's choice.
func checkEnvironment(t plugin.Target, d *descriptor.Descriptor, target descriptor.Target, envConfig map[string]any) error {
	ec, ok := t.(plugin.EnvironmentCheck)
	if !ok {
		return nil
	}
	var envWith map[string]any
	if et, ok := envConfig["target"].(map[string]any); ok && et["plugin"] == target.Plugin {
		envWith, _ = et["with"].(map[string]any)
	}
	return ec.CheckEnvironment(d.Environment, target.With, envWith)
}

// checkSteps is checkPlugins for the custom steps. A plugin custom steps
// may not use is refused with a "did you mean" among those they may when
// it is no registered step plugin (a typo of one).
func (a *Admitter) checkSteps(ctx context.Context, d *descriptor.Descriptor) (problems []manent.FieldError, pending []error) {
	reg := a.cfg.Plugins
	for i, s := range d.Steps {
		if s.Plugin == "" {
			continue
		}
		if !a.stepAllowed(s.Plugin) {
			allowed := "none"
			if len(a.cfg.StepPlugins) > 0 {
				allowed = strings.Join(a.cfg.StepPlugins, ", ")
			}
			hint := ""
			if _, err := reg.Runner(s.Plugin); reg == nil || err != nil {
				if close := suggest.Closest(s.Plugin, a.cfg.StepPlugins); close != "" {
					hint = fmt.Sprintf("did you mean %q? ", close)
				}
			}
			problems = append(problems, manent.FieldError{Path: fmt.Sprintf("/steps/%d/plugin", i),
				Message: fmt.Sprintf("step %s: plugin %q is not allowed in custom steps on %s (%splugins.steps: %s)", s.Name, s.Plugin, a.here(), hint, allowed)})
			continue
		}
		if reg == nil {
			continue
		}
		r, err := reg.Runner(s.Plugin)
		if err != nil {
			problems = append(problems, manent.FieldError{Path: fmt.Sprintf("/steps/%d/plugin", i),
				Message: fmt.Sprintf("step %s: %v", s.Name, err)})
			continue
		}
		if err := plugin.Validate(ctx, r, s.With); plugin.AsUndecided(err) != nil {
			pending = append(pending, fmt.Errorf("/steps/%d/with: step %s: %w", i, s.Name, err))
		} else if err != nil {
			problems = append(problems, withProblems(fmt.Sprintf("/steps/%d/with", i), "step "+s.Name, fmt.Sprintf("step %s: %s", s.Name, s.Plugin), err)...)
		}
	}
	return problems, pending
}

// withProblems turns what a plugin's Validate found wrong with `with` (at
// base) into field errors: one per setting, at the setting's place, led by
// who (naming the plugin: the setting errors come without the plugin's own
// prefix), when the plugin says which (plugin.SettingError); otherwise one
// at base, led by whole.
func withProblems(base, whole, who string, err error) []manent.FieldError {
	ses := plugin.SettingErrors(err)
	if ses == nil {
		return []manent.FieldError{{Path: base, Message: fmt.Sprintf("%s: %v", whole, err)}}
	}
	out := make([]manent.FieldError, 0, len(ses))
	for _, se := range ses {
		path := base
		if se.Path != "" {
			path += "/" + se.Path
		}
		out = append(out, manent.FieldError{Path: path, Message: who + ": " + se.Error()})
	}
	return out
}

// fieldErrors turns a policy error into field errors (at path when it has
// none of its own).
func fieldErrors(err error, path string) []manent.FieldError {
	if err == nil {
		return nil
	}
	var me *manent.Error
	if errors.As(err, &me) && len(me.Fields) > 0 {
		return me.Fields
	}
	return []manent.FieldError{{Path: path, Message: manent.ErrorMessage(err)}}
}

// knownChannels lists the configured chat channels for an error message.
func knownChannels(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
