package admit_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/admit"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/governance"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/pkg/urlpolicy"
	"github.com/manent-io/manent/plugins/local"
	"github.com/manent-io/manent/plugins/script"
)

func TestCheckPipeline(t *testing.T) {
	tests := []struct {
		steps []string
		want  string // "" for valid, else a fragment of the error
	}{
		{nil, ""},
		{[]string{"artifacts", "deploy", "activation", "post-test"}, ""},
		{[]string{"deploy"}, ""},
		{[]string{"artifacts", "deploy", "activaton"}, `unknown step "activaton"`},
		{[]string{"artifacts", "deploy", "deploy"}, "listed twice"},
		{[]string{"artifacts", "activation"}, `must include "deploy"`},
		{[]string{"deploy", "artifacts"}, `"artifacts" must come before "deploy"`},
		{[]string{"activation", "deploy"}, `"deploy" must come before "activation"`},
	}
	for _, tt := range tests {
		err := admit.CheckPipeline(tt.steps)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v: %v, want valid", tt.steps, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%v: %v, want an error with %q", tt.steps, err, tt.want)
		}
	}
}

type fixture struct {
	a   *admit.Admitter
	art string
	dir string // the local root is dir/targets
	st  *store.Store
}

func newAdmitterStore(t *testing.T) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, enginetest.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

func newAdmitter(t *testing.T, cfg admit.Config) *fixture {
	t.Helper()
	st := newAdmitterStore(t)
	dir := t.TempDir()
	reg := cfg.Plugins // a test's own plugins, the built-in ones added
	if reg == nil {
		reg = plugin.NewRegistry()
	}
	sp := script.New(script.Options{})
	lp := local.New(local.Options{Root: filepath.Join(dir, "targets")})
	if err := errors.Join(reg.RegisterTarget("local", lp), reg.RegisterTarget("script", sp), reg.RegisterRunner("script", sp)); err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Plugins, cfg.TargetsDir = st, reg, filepath.Join(dir, "targets")
	cfg.Sources = urlpolicy.TrialSources()
	a, err := admit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	art := filepath.Join(dir, "app.txt")
	if err := os.WriteFile(art, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &fixture{a: a, art: "file://" + art, dir: dir, st: st}
}

func (f *fixture) descriptor(t *testing.T, extra string) *descriptor.Descriptor {
	t.Helper()
	d, err := descriptor.Parse([]byte("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: \"1\"\nartifact: {url: " + f.art + "}\n" + extra))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var ci = manent.Identity{Subject: "token:ci"}

// Unknown plugins are refused at submission (SPEC §11.2), each at its path,
// in one 422.
func TestUnknownPluginsRefused(t *testing.T) {
	f := newAdmitter(t, admit.Config{Trial: true})
	d := f.descriptor(t, "target: {plugin: helm}\nsteps:\n  - {name: smoke, after: deploy, plugin: pytest}\n  - {name: ok, after: deploy, plugin: script, with: {command: [\"true\"]}}\n")
	_, err := f.a.Admit(context.Background(), admit.Request{Descriptor: d, Identity: ci})
	var me *manent.Error
	if !errors.As(err, &me) || me.Code != manent.EInvalid {
		t.Fatalf("got %v, want a 422", err)
	}
	paths := map[string]string{}
	for _, fe := range me.Fields {
		paths[fe.Path] = fe.Message
	}
	if !strings.Contains(paths["/target/plugin"], "helm") || !strings.Contains(paths["/steps/0/plugin"], "pytest") || len(paths) != 2 {
		t.Fatalf("field errors %+v: want /target/plugin (helm) and /steps/0/plugin (pytest) only", me.Fields)
	}
}

// A mistyped plugin gets a "did you mean", as a mistyped step or setting
// does, and is reported with the other problems of the descriptor (a bad
// setting of another step), not instead of them; so is a mistyped name
// among the plugins custom steps may use on a server that is no trial.
func TestMistypedPluginSuggested(t *testing.T) {
	problems := func(f *fixture, extra string) map[string]string {
		t.Helper()
		_, err := f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, extra), Identity: ci})
		var me *manent.Error
		if !errors.As(err, &me) || me.Code != manent.EInvalid {
			t.Fatalf("got %v, want a 422", err)
		}
		paths := map[string]string{}
		for _, fe := range me.Fields {
			paths[fe.Path] = fe.Message
		}
		return paths
	}
	trial := newAdmitter(t, admit.Config{Trial: true})
	got := problems(trial, "target: {plugin: locl}\nsteps:\n  - {name: smoke, after: deploy, plugin: scirpt}\n  - {name: ok, after: deploy, plugin: script, with: {command: 7}}\n")
	want := map[string]string{
		"/target/plugin":        `unknown target plugin "locl" (did you mean "local"? known: local, script)`,
		"/steps/0/plugin":       `step smoke: unknown step plugin "scirpt" (did you mean "script"? known: script)`,
		"/steps/1/with/command": "step ok: script: with.command",
	}
	for path, msg := range want {
		if !strings.HasPrefix(got[path], msg) {
			t.Errorf("%s: %q, want it to begin %q", path, got[path], msg)
		}
	}
	if len(got) != len(want) {
		t.Errorf("problems %v, want those at %v only", got, want)
	}

	strict := newAdmitter(t, admit.Config{StepPlugins: []string{"script"}})
	got = problems(strict, "target: {plugin: local}\nsteps:\n  - {name: smoke, after: deploy, plugin: scirpt}\n")
	if msg := `step smoke: plugin "scirpt" is not allowed in custom steps on this server (did you mean "script"? plugins.steps: script)`; got["/steps/0/plugin"] != msg {
		t.Errorf("/steps/0/plugin: %q, want %q (all: %v)", got["/steps/0/plugin"], msg, got)
	}
	// A problem of the environment (here: no target at all) leaves the
	// target unchecked, not the steps: the mistyped plugin was hidden.
	got = problems(strict, "steps:\n  - {name: smoke, after: deploy, plugin: scirpt}\n")
	if !strings.HasPrefix(got["/target"], "no target") || !strings.Contains(got["/steps/0/plugin"], `did you mean "script"?`) || len(got) != 2 {
		t.Errorf("problems %v, want /target (no target) and /steps/0/plugin (did you mean) together", got)
	}
}

// validate and the run share one computation: what admission decides (the
// trial target and rollback enabled) is what the config step runs with.
func TestReconfigureAgreesWithAdmission(t *testing.T) {
	f := newAdmitter(t, admit.Config{Trial: true})
	adm, err := f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, ""), Identity: ci, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	in := adm.Input
	if !in.Rollback.Enabled || in.Target.Plugin != "local" || in.Target.With["dir"] == nil {
		t.Fatalf("admitted %+v %+v: want the trial local target and rollback enabled", in.Target, in.Rollback)
	}
	rc, err := f.a.Reconfigure(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Rollback.Enabled != in.Rollback.Enabled || strings.Join(rc.Rollback.On, ",") != strings.Join(in.Rollback.On, ",") ||
		rc.Target.Plugin != in.Target.Plugin || rc.Target.With["dir"] != in.Target.With["dir"] {
		t.Fatalf("config step %+v %+v, admission %+v %+v: they must agree", rc.Target, rc.Rollback, in.Target, in.Rollback)
	}
}

// The config step re-applies the whole governance decision, not freezes
// only: a policy that denies the deploy when it starts refuses it,
// permanently.
func TestReconfigureReappliesGovernance(t *testing.T) {
	allow := newAdmitter(t, admit.Config{Trial: true})
	adm, err := allow.a.Admit(context.Background(), admit.Request{Descriptor: allow.descriptor(t, ""), Identity: ci})
	if err != nil {
		t.Fatal(err)
	}
	// The same deploy met by a server whose policy now requires staging first.
	rules, err := governance.ParseRules("g.yaml", []byte("promotion:\n  - {environment: prod, requires: [staging]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	deny := newAdmitter(t, admit.Config{Trial: true, Governance: rules})
	_, err = deny.a.Reconfigure(context.Background(), adm.Input)
	if err == nil || !plugin.IsPermanent(err) || !strings.Contains(err.Error(), "staging") {
		t.Fatalf("got %v, want a permanent refusal naming the missing promotion", err)
	}
}

// A percentage rollout on a target that cannot deploy a share of a
// release is refused at submission (SPEC §11.6), at /rollout/percentages,
// instead of deploying everything at once; a target that honours
// percentages (script: MANENT_ROLLOUT_PERCENT) is admitted, and so are
// waves of targets on any plugin.
func TestPercentagesNeedACapablePlugin(t *testing.T) {
	f := newAdmitter(t, admit.Config{Trial: true})
	ctx := context.Background()
	x := filepath.Join(f.dir, "targets", "x")
	for _, tt := range []struct {
		name, extra string
		refused     bool
	}{
		{"local, percentages", "target: {plugin: local, with: {dir: " + x + "}}\nrollout: {percentages: [10, 100]}\n", true},
		{"trial target, percentages", "rollout: {percentages: [50, 100]}\n", true},
		{"script, percentages", "target: {plugin: script, with: {command: [\"true\"]}}\nrollout: {percentages: [10, 100]}\n", false},
		{"local, waves", "target: {plugin: local, with: {dir: " + x + "}}\nrollout: {waves: [{name: a, targets: [eu-1]}]}\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.a.Admit(ctx, admit.Request{Descriptor: f.descriptor(t, tt.extra), Identity: ci, DryRun: true})
			if !tt.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var me *manent.Error
			if !errors.As(err, &me) || me.Code != manent.EInvalid || len(me.Fields) != 1 || me.Fields[0].Path != "/rollout/percentages" ||
				!strings.Contains(me.Fields[0].Message, "target local cannot honour a percentage rollout") {
				t.Fatalf("got %v (%+v), want a 422 at /rollout/percentages naming the local target", err, me)
			}
		})
	}
}

// The local target deploys each rollout target into its own directory,
// named from the target: two targets that map to one directory ("eu/1"
// and "eu_1") would overwrite each other's releases, so the rollout is
// refused at submission, naming both.
func TestLocalTargetsMustNotShareADirectory(t *testing.T) {
	f := newAdmitter(t, admit.Config{Trial: true})
	x := filepath.Join(f.dir, "targets", "x")
	extra := "target: {plugin: local, with: {dir: " + x + "}}\nrollout: {waves: [{name: a, targets: [eu/1]}, {name: b, targets: [eu_1, us-1]}]}\n"
	_, err := f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, extra), Identity: ci, DryRun: true})
	var me *manent.Error
	if !errors.As(err, &me) || me.Code != manent.EInvalid || len(me.Fields) != 1 || me.Fields[0].Path != "/rollout/waves" ||
		!strings.Contains(me.Fields[0].Message, `"eu/1" and "eu_1" would share the directory eu_1`) {
		t.Fatalf("got %v (%+v), want a 422 at /rollout/waves naming both targets", err, me)
	}
}

// A source.committed_at in the future (past a few minutes of clock skew)
// is refused: DORA's lead time runs from it to the deploy's end.
func TestCommitTimeInTheFutureRefused(t *testing.T) {
	f := newAdmitter(t, admit.Config{Trial: true})
	at := func(d time.Duration) string {
		return "source: {commit: abc, committed_at: " + time.Now().Add(d).UTC().Format(time.RFC3339) + "}\n"
	}
	_, err := f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, at(24*time.Hour)), Identity: ci, DryRun: true})
	var me *manent.Error
	if !errors.As(err, &me) || me.Code != manent.EInvalid || len(me.Fields) != 1 ||
		me.Fields[0].Path != "/source/committed_at" || !strings.Contains(me.Fields[0].Message, "is in the future") {
		t.Fatalf("a commit tomorrow: %v, want a 422 at /source/committed_at", err)
	}
	for _, d := range []time.Duration{-time.Hour, time.Minute} { // past; within the clock skew
		if _, err := f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, at(d)), Identity: ci, DryRun: true}); err != nil {
			t.Fatalf("a commit %v from now: %v", d, err)
		}
	}
}

// Workers whose configurations differ (SPEC §11.3): a deploy submitted
// through a worker whose governance wants no approval, run by one whose
// governance wants one on prod, is refused at its config step, naming the
// executing worker, its rule and the worker it came through — it did not
// run unapproved. One that went through the approval is not refused; nor
// is a change ticket it got. On one server (SQLite) the message says the
// configuration changed since the submission.
func TestReconfigureRefusesWaitsNotGoneThrough(t *testing.T) {
	ctx := context.Background()
	odd := newAdmitter(t, admit.Config{Trial: true, Worker: "w3", Shared: true})
	adm, err := odd.a.Admit(ctx, admit.Request{Descriptor: odd.descriptor(t, ""), Identity: ci})
	if err != nil {
		t.Fatal(err)
	}
	if adm.Input.Worker != "w3" {
		t.Fatalf("admitted input says worker %q, want w3 (the worker it was submitted through)", adm.Input.Worker)
	}
	rules, err := governance.ParseRules("g.yaml", []byte("approvals:\n  - {environments: [prod], count: 1, approvers: [\"group:sre\"]}\nchange:\n  - {environments: [staging]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	strict := newAdmitter(t, admit.Config{Trial: true, Governance: rules, ChangeManagement: true, Worker: "w2", Shared: true})
	_, err = strict.a.Reconfigure(ctx, adm.Input)
	want := "worker w2's governance requires 1 approval by group:sre for prod, which this deploy did not get when it was submitted through w3 — the workers' configurations differ (admin workers)"
	if err == nil || !plugin.IsPermanent(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want a permanent refusal saying %q", err, want)
	}

	// Submitted through the strict worker: it waited for the approval.
	own, err := strict.a.Admit(ctx, admit.Request{Descriptor: strict.descriptor(t, ""), Identity: ci})
	if err != nil {
		t.Fatal(err)
	}
	if own.Input.Waits.Approvals == nil {
		t.Fatal("the strict worker admitted the deploy without an approval wait")
	}
	if _, err := strict.a.Reconfigure(ctx, own.Input); err != nil {
		t.Fatalf("a deploy that went through the approval is refused: %v", err)
	}

	// A change ticket required at start, not asked for at submission.
	stg := odd.descriptor(t, "")
	stg.Environment = "staging"
	admStg, err := odd.a.Admit(ctx, admit.Request{Descriptor: stg, Identity: ci})
	if err != nil {
		t.Fatal(err)
	}
	_, err = strict.a.Reconfigure(ctx, admStg.Input)
	if want := "worker w2's governance requires an approved change ticket for staging, which this deploy did not get when it was submitted through w3"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}

	// One server: its own configuration changed.
	single := newAdmitter(t, admit.Config{Trial: true})
	adm1, err := single.a.Admit(ctx, admit.Request{Descriptor: single.descriptor(t, ""), Identity: ci})
	if err != nil {
		t.Fatal(err)
	}
	_, err = newAdmitter(t, admit.Config{Trial: true, Governance: rules}).a.Reconfigure(ctx, adm1.Input)
	if want := "this server's governance requires 1 approval by group:sre for prod, which this deploy did not get when it was submitted — the governance configuration changed since; submit it again"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// A refusal that depends on the executing worker's configuration names
// that worker when several share the database: "this server" does not say
// which of them refused.
func TestReconfigureNamesTheWorker(t *testing.T) {
	ctx := context.Background()
	trial := newAdmitter(t, admit.Config{Trial: true, Worker: "w1", Shared: true})
	adm, err := trial.a.Admit(ctx, admit.Request{Descriptor: trial.descriptor(t, "target: {plugin: local}\nsteps:\n  - {name: smoke, after: deploy, plugin: script, with: {command: [\"true\"]}}\n"), Identity: ci})
	if err != nil {
		t.Fatal(err)
	}
	strict := newAdmitter(t, admit.Config{Worker: "w3", Shared: true})
	_, err = strict.a.Reconfigure(ctx, adm.Input)
	if want := `plugin "script" is not allowed in custom steps on worker w3 (plugins.steps: none)`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
	_, err = newAdmitter(t, admit.Config{}).a.Reconfigure(ctx, adm.Input)
	if want := `plugin "script" is not allowed in custom steps on this server`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("one server: got %v, want %q", err, want)
	}
}

// The admitted input names the successes of its version the governance
// policy judged promotion on: engine.Submit refuses the deploy when
// retention.deploys removed one in between (the policy, asked again at its
// start, would refuse it then).
func TestAdmissionNamesTheSuccessesPromotionWasJudgedOn(t *testing.T) {
	rules, err := governance.ParseRules("g.yaml", []byte("promotion:\n  - {environment: prod, requires: [staging]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := newAdmitter(t, admit.Config{Trial: true, Governance: rules})
	ctx := context.Background()
	at := time.Now().UTC()
	err = f.st.Tx(ctx, func(tx *sql.Tx) error {
		return f.st.InsertDeployment(ctx, tx, &store.Record{Deployment: manent.Deployment{ID: "dpl_staging", Application: "billing",
			Environment: "staging", Version: "1", State: manent.StatePending, Requester: "token:t", CreatedAt: at}, Input: []byte(`{}`)})
	})
	if err == nil {
		err = f.st.Finish(ctx, "dpl_staging", store.Outcome{State: manent.StateSuccess, At: at})
	}
	if err != nil {
		t.Fatal(err)
	}
	adm, err := f.a.Admit(ctx, admit.Request{Descriptor: f.descriptor(t, ""), Identity: ci})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(adm.Input.Successes, ","); got != "dpl_staging" {
		t.Fatalf("the admitted input's successes: %q, want dpl_staging", got)
	}
}

// A rollout deploys each of its targets into a directory of its own under
// with.dir; one that another environment owns (its with.dir) is refused at
// submission, as with.dir itself would be, not at the first action of the
// wave that reaches it, after the waves before it deployed.
func TestRolloutTargetInAnotherEnvironmentsDirectory(t *testing.T) {
	f := newAdmitter(t, admit.Config{Trial: true})
	x := filepath.Join(f.dir, "targets", "x")
	if err := os.MkdirAll(filepath.Join(x, "eu-2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(x, "eu-2", local.OwnerFile), []byte(`{"application":"billing","environment":"staging"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	extra := "target: {plugin: local, with: {dir: " + x + "}}\nrollout: {waves: [{name: a, targets: [eu-1]}, {name: b, targets: [eu-2]}]}\n"
	_, err := f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, extra), Identity: ci, DryRun: true})
	var me *manent.Error
	if !errors.As(err, &me) || me.Code != manent.EInvalid || len(me.Fields) != 1 || me.Fields[0].Path != "/target/with/dir" ||
		!strings.Contains(me.Fields[0].Message, `application "billing" environment "staging"`) || !strings.Contains(me.Fields[0].Message, "eu-2") {
		t.Fatalf("got %v (%+v), want a 422 at /target/with/dir naming billing/staging and the target eu-2", err, me)
	}
	if !strings.Contains(me.Fields[0].Message, "rollout target eu-2 deploys into") {
		t.Errorf("%q does not say the rollout target deploys there", me.Fields[0].Message)
	}
	// Its own directory, deployed by an earlier rollout, is admitted.
	if err := os.WriteFile(filepath.Join(x, "eu-2", local.OwnerFile), []byte(`{"application":"billing","environment":"prod"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, extra), Identity: ci, DryRun: true}); err != nil {
		t.Fatalf("its own directories refused: %v", err)
	}
}

// A with.dir inside another environment's directory (its releases/) or
// holding one is a 422 at /target/with/dir naming the owner: a deploy
// there would prune or overwrite the other's live releases.
func TestTargetDirectoryNestedInAnotherEnvironments(t *testing.T) {
	f := newAdmitter(t, admit.Config{Trial: true})
	staging := filepath.Join(f.dir, "targets", "srv", "staging")
	if err := os.MkdirAll(staging, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(staging, local.OwnerFile), []byte(`{"application":"billing","environment":"staging"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, says string }{
		{filepath.Join(staging, "releases", "x"), "is inside"},
		{filepath.Dir(staging), "holds"},
	} {
		extra := "target: {plugin: local, with: {dir: " + c.dir + "}}\n"
		_, err := f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, extra), Identity: ci, DryRun: true})
		var me *manent.Error
		if !errors.As(err, &me) || me.Code != manent.EInvalid || len(me.Fields) != 1 || me.Fields[0].Path != "/target/with/dir" ||
			!strings.Contains(me.Fields[0].Message, `application "billing" environment "staging"`) || !strings.Contains(me.Fields[0].Message, c.says+" "+staging) {
			t.Errorf("with.dir %s: got %v (%+v), want a 422 at /target/with/dir saying it %s %s", c.dir, err, me, c.says, staging)
		}
	}
}

// lostDatabase is a governance decider whose reads of the database fail
// as they do while PostgreSQL restarts: the connection is lost mid-query.
type lostDatabase struct{}

func (lostDatabase) Decide(context.Context, governance.Input) (governance.Decision, error) {
	return governance.Decision{}, fmt.Errorf("read freezes: %w", io.ErrUnexpectedEOF)
}

// A governance decision that cannot read the database is a storage fault
// (503 with Retry-After), not a refusal of the deploy: a 422 "the
// governance policy could not decide: unexpected EOF" blamed the
// descriptor for a database restart, and a CI job does not retry a 422.
func TestGovernanceStorageFaultIsNoRefusal(t *testing.T) {
	f := newAdmitter(t, admit.Config{Trial: true, Governance: lostDatabase{}})
	d := f.descriptor(t, "")
	_, err := f.a.Admit(context.Background(), admit.Request{Descriptor: d, Identity: ci})
	if err == nil {
		t.Fatal("admitted while governance could not read the database")
	}
	if code := manent.ErrorCode(err); code == manent.EInvalid {
		t.Fatalf("refused (422) with %v, want a storage fault", err)
	}
	if store.AsFault(err) == nil {
		t.Fatalf("%v is not a storage fault (503)", err)
	}
}

// A recurring schedule whose count of the environment's schedules cannot
// be read is not admitted as if under schedules.max_per_environment: the
// read's error was ignored, so a dry run (and the admission before
// InsertSchedule) said yes to a schedule past the limit while the
// database was away. The store is closed here: every read fails.
func TestScheduleCountReadFailureIsNoYes(t *testing.T) {
	f := newAdmitter(t, admit.Config{Trial: true, SchedulesPerEnvironment: 1})
	d := f.descriptor(t, "schedule: {cron: \"0 3 * * *\"}\n")
	if _, err := f.a.Admit(context.Background(), admit.Request{Descriptor: d, Identity: ci, DryRun: true}); err != nil {
		t.Fatalf("dry run with the store open: %v", err)
	}
	f.st.Close()
	for _, dry := range []bool{true, false} {
		var err error
		if dry {
			_, err = f.a.Admit(context.Background(), admit.Request{Descriptor: d, Identity: ci, DryRun: true})
		} else {
			_, err = f.a.AdmitSchedule(context.Background(), admit.Request{Descriptor: d, Identity: ci})
		}
		if err == nil {
			t.Fatalf("dry run %v: admitted although the schedules could not be counted", dry)
		}
		if code := manent.ErrorCode(err); code == manent.EInvalid {
			t.Errorf("dry run %v: refused (422) with %v, want the read's error", dry, err)
		}
		if !strings.Contains(err.Error(), "count the recurring schedules of billing/prod") {
			t.Errorf("dry run %v: %v does not say which read failed", dry, err)
		}
	}
}
