package engine_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/store"
)

// schedule records a schedule of yml without registering it with the DBOS
// scheduler: the test runs its ticks (Engine.Tick) at times it chooses.
func (f *fixture) schedule(yml string) string {
	f.t.Helper()
	sc := &store.Schedule{ID: engine.NewScheduleID(), Application: "web", Environment: "prod", Cron: "@hourly",
		Descriptor: []byte(yml), Requester: "token:test", CreatedAt: time.Now()}
	if err := f.st.InsertSchedule(context.Background(), sc, 0); err != nil {
		f.t.Fatal(err)
	}
	return sc.ID
}

func (f *fixture) tick(schedule string, at time.Time) string {
	f.t.Helper()
	id, err := f.eng.Tick(context.Background(), schedule, at)
	if err != nil {
		f.t.Fatal(err)
	}
	if want := engine.TickDeployID(schedule, at); id != want {
		f.t.Fatalf("tick id %q, want %q", id, want)
	}
	return id
}

// heldTick is a schedule whose deploys hold in a step before deploy until
// release exists, and its tick running there.
type heldTick struct {
	schedule, yml, url string
	running, release   string
}

// holdTick records a held schedule, ticks it at t0 and waits for the tick
// to be PENDING in its holding step.
func (f *fixture) holdTick(t0 time.Time) heldTick {
	f.t.Helper()
	url, _ := f.artifact("app", "x")
	started, release := filepath.Join(f.dir, "started"), filepath.Join(f.dir, "release")
	hold := fmt.Sprintf(`touch %s; i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done`, started, release)
	yml := descriptorYAML("web", "prod", "1", url, "", fmt.Sprintf("steps:\n  - {name: gate, before: deploy, plugin: script, with: {command: [sh, -c, %q]}}\n", hold))
	h := heldTick{schedule: f.schedule(yml), yml: yml, url: url, release: release}
	h.running = f.tick(h.schedule, t0)
	enginetest.Eventually(f.t, 30*time.Second, func() bool { _, err := os.Stat(started); return err == nil }, "the first tick to run")
	f.waitState(h.running, manent.StatePending)
	return h
}

// A tick supersedes the earlier ticks of its schedule that have not
// started: ENQUEUED and AWAITING_APPROVAL ones end CANCELLED "superseded by
// <tick>"; a running tick and a tick of another schedule are left alone.
func TestTickSupersedesWaitingTicks(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		ctx := context.Background()
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		h := f.holdTick(t0)
		sch, yml, running, release := h.schedule, h.yml, h.running, h.release
		other := f.schedule(descriptorYAML("web", "prod", "2", h.url, "", ""))
		queued := f.tick(sch, t0.Add(time.Hour))
		otherTick := f.tick(other, t0.Add(time.Hour))
		if d := f.state(queued); d.State != manent.StateEnqueued {
			t.Fatalf("second tick %s, want ENQUEUED behind the running one", d.State)
		}
		if d := f.state(running); d.State != manent.StatePending {
			t.Fatalf("a new tick changed the running tick: %s (%s)", d.State, d.Error)
		}
		// An earlier tick waiting for approvals (submitted as a tick would be).
		approvalAt := t0.Add(90 * time.Minute)
		approving := f.submit(yml, func(in *plan.Input) {
			in.ID = engine.TickDeployID(sch, approvalAt)
			in.Waits = plan.Waits{Approvals: &plan.ApprovalRule{Count: 1, Approvers: []string{"group:sre"}, Expires: time.Hour}}
		})
		f.waitState(approving, manent.StateAwaitingApproval)

		latest := f.tick(sch, t0.Add(2*time.Hour))
		for _, id := range []string{queued, approving} {
			d := f.state(id)
			if d.State != manent.StateCancelled || d.Error != "superseded by "+latest {
				t.Errorf("%s: %s %q, want CANCELLED \"superseded by %s\"", id, d.State, d.Error, latest)
			}
		}
		if d := f.state(running); d.State != manent.StatePending {
			t.Errorf("the running tick: %s (%s), want it left running", d.State, d.Error)
		}
		if d := f.state(otherTick); d.State != manent.StateEnqueued {
			t.Errorf("the tick of another schedule: %s (%s), want ENQUEUED", d.State, d.Error)
		}
		if d := f.state(latest); d.State != manent.StateEnqueued {
			t.Errorf("the latest tick: %s (%s), want ENQUEUED", d.State, d.Error)
		}
		audit, err := f.st.Audit(ctx, store.AuditFilter{Action: "deployment.supersede"})
		if err != nil {
			t.Fatal(err)
		}
		targets := map[string]bool{}
		for _, a := range audit {
			targets[a.Target] = true
			if a.RequestID != latest {
				t.Errorf("audit entry %+v: want request id %s", a, latest)
			}
		}
		if len(audit) != 2 || !targets[queued] || !targets[approving] {
			t.Errorf("deployment.supersede entries %+v, want one for %s and %s", audit, queued, approving)
		}

		// The tick step run again (a crash before its checkpoint) creates
		// nothing and supersedes nothing twice.
		if again := f.tick(sch, t0.Add(2*time.Hour)); again != latest {
			t.Fatalf("tick again: %s", again)
		}
		if audit, _ := f.st.Audit(ctx, store.AuditFilter{Action: "deployment.supersede"}); len(audit) != 2 {
			t.Errorf("after the tick ran again: %d supersede entries, want 2", len(audit))
		}

		_ = os.WriteFile(release, nil, 0o644)
		for _, id := range []string{running, latest, otherTick} {
			if d := f.wait(id, 60*time.Second); d.State != manent.StateSuccess {
				t.Errorf("%s: %s (%s), want SUCCESS", id, d.State, d.Error)
			}
		}
		if d := f.wait(queued, 5*time.Second); len(d.Steps) > 0 {
			for _, s := range d.Steps {
				if s.StartedAt != nil {
					t.Errorf("the superseded tick ran step %s", s.Name)
				}
			}
		}
	})
}

// ticksLeftByACrash creates a schedule and the deploys of its ticks at t0
// and t0+1h, as a crash after the second tick created its deploy leaves
// them: the second tick's deploy created, the first's not yet superseded
// and waiting for an approval (returned once it does).
func ticksLeftByACrash(t *testing.T, f *fixture) (sch string, t0 time.Time, old, later string) {
	t.Helper()
	url, _ := f.artifact("app", "x")
	yml := descriptorYAML("web", "prod", "1", url, "", "")
	sch = f.schedule(yml)
	t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rule := &plan.ApprovalRule{Count: 1, Approvers: []string{"group:sre"}, Expires: time.Hour}
	old = f.submit(yml, func(in *plan.Input) { in.ID = engine.TickDeployID(sch, t0); in.Waits = plan.Waits{Approvals: rule} })
	later = f.submit(yml, func(in *plan.Input) {
		in.ID = engine.TickDeployID(sch, t0.Add(time.Hour))
		in.Waits = plan.Waits{Approvals: rule}
	})
	f.waitState(old, manent.StateAwaitingApproval)
	return sch, t0, old, later
}

// Run again after a crash that left an earlier tick waiting, the tick step
// supersedes it although its own deploy exists already.
func TestTickAgainSupersedes(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		sch, t0, old, later := ticksLeftByACrash(t, f)
		f.tick(sch, t0.Add(time.Hour))
		if d := f.state(old); d.State != manent.StateCancelled || d.Error != "superseded by "+later {
			t.Fatalf("earlier tick: %s %q, want CANCELLED \"superseded by %s\"", d.State, d.Error, later)
		}
		if d := f.state(later); d.State != manent.StateAwaitingApproval {
			t.Fatalf("later tick: %s, want AWAITING_APPROVAL", d.State)
		}
	})
}

// An older tick's outcome never replaces a later one's on the schedule:
// the tick of 00:00 run again late (its deploy found, its outcome recorded
// once more), or recorded by a slower worker, after the tick of 01:00 was
// recorded. The schedule keeps showing 01:00.
func TestOlderTickOutcomeKeepsTheLaterOne(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		ctx := context.Background()
		sch, t0, old, later := ticksLeftByACrash(t, f)
		f.tick(sch, t0.Add(time.Hour))
		shows := func(after string) {
			t.Helper()
			sc, err := f.st.GetSchedule(ctx, sch)
			if err != nil {
				t.Fatal(err)
			}
			if sc.LastDeploy != later || sc.LastTick == nil || !sc.LastTick.Equal(t0.Add(time.Hour)) || sc.LastError != "" {
				t.Errorf("after %s: schedule shows last deploy %q, last tick %v, last error %q; want %s at %s",
					after, sc.LastDeploy, sc.LastTick, sc.LastError, later, t0.Add(time.Hour))
			}
		}
		if id, err := f.eng.Tick(ctx, sch, t0); err != nil || id != old {
			t.Fatalf("the tick of %s run again: %q, %v; want %s", t0, id, err, old)
		}
		shows("the tick of 00:00 run again")
		if err := f.st.ScheduleTicked(ctx, sch, t0.Add(59*time.Minute), "", "refused"); err != nil {
			t.Fatal(err)
		}
		shows("the refusal of a tick of 00:59 recorded late")
	})
}

// The race a supersede can lose: a worker picks the earlier tick up
// between its flag and its removal from the queue, so the tick's own first
// step ends it. It still ends CANCELLED "superseded by <tick>" with no
// step of its own run: the reason is kept with the flag. The flag is set
// here as supersede sets it, on a tick queued behind a running one;
// releasing the running one lets a worker pick the flagged tick up.
func TestSupersededTickPickedUpMeanwhile(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		ctx := context.Background()
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		h := f.holdTick(t0)
		sch, running, release := h.schedule, h.running, h.release
		queued := f.tick(sch, t0.Add(time.Hour))
		if d := f.state(queued); d.State != manent.StateEnqueued {
			t.Fatalf("second tick %s, want ENQUEUED behind the running one", d.State)
		}
		why := "superseded by " + engine.TickDeployID(sch, t0.Add(2*time.Hour))
		if _, set, err := f.st.RequestCancel(ctx, queued, store.CancelRequest{Reason: why,
			States: []manent.State{manent.StateEnqueued}}); err != nil || !set {
			t.Fatalf("flag the queued tick: set %v, %v", set, err)
		}
		_ = os.WriteFile(release, nil, 0o644)
		if d := f.wait(running, 60*time.Second); d.State != manent.StateSuccess {
			t.Fatalf("the running tick: %s (%s)", d.State, d.Error)
		}
		d := f.wait(queued, 60*time.Second)
		if d.State != manent.StateCancelled || d.Error != why {
			t.Errorf("the tick picked up after its flag: %s %q, want CANCELLED %q", d.State, d.Error, why)
		}
		// Only cleanup, which a cancelled deploy always runs (its work
		// directory), may have started.
		for _, s := range d.Steps {
			if s.StartedAt != nil && s.Name != manent.StepCleanup {
				t.Errorf("the superseded tick ran step %s", s.Name)
			}
		}
	})
}

// A crash between supersede's flag (with its audit entry) and the end of
// the earlier tick: the tick step run again ends it CANCELLED with the
// flag's reason, and writes no second audit entry.
func TestTickAgainEndsAFlaggedTick(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		ctx := context.Background()
		url, _ := f.artifact("app", "x")
		yml := descriptorYAML("web", "prod", "1", url, "", "")
		sch := f.schedule(yml)
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		rule := &plan.ApprovalRule{Count: 1, Approvers: []string{"group:sre"}, Expires: time.Hour}
		old := f.submit(yml, func(in *plan.Input) { in.ID = engine.TickDeployID(sch, t0); in.Waits = plan.Waits{Approvals: rule} })
		f.waitState(old, manent.StateAwaitingApproval)
		later := engine.TickDeployID(sch, t0.Add(time.Hour))
		why := "superseded by " + later
		// What supersede committed before the crash.
		if _, set, err := f.st.RequestCancel(ctx, old, store.CancelRequest{Reason: why, States: []manent.State{manent.StateAwaitingApproval},
			Also: func(tx *sql.Tx) error {
				return f.st.AppendAuditTx(ctx, tx, store.AuditEntry{Identity: "system:manent", Action: "deployment.supersede",
					Target: old, RequestID: later, Outcome: "accepted"})
			}}); err != nil || !set {
			t.Fatalf("flag: set %v, %v", set, err)
		}
		if d := f.state(old); d.State != manent.StateAwaitingApproval {
			t.Fatalf("flagged tick: %s, want still AWAITING_APPROVAL (the crash left it there)", d.State)
		}
		f.tick(sch, t0.Add(time.Hour))
		if d := f.state(old); d.State != manent.StateCancelled || d.Error != why {
			t.Errorf("flagged tick after the tick ran again: %s %q, want CANCELLED %q", d.State, d.Error, why)
		}
		audit, err := f.st.Audit(ctx, store.AuditFilter{Action: "deployment.supersede"})
		if err != nil || len(audit) != 1 {
			t.Errorf("deployment.supersede entries %+v (%v), want the one written with the flag", audit, err)
		}
	})
}

// When the clocks go back the scheduler fires a schedule inside the
// repeated hour twice (02:30 CEST, then 02:30 CET): the second tick creates
// no deploy, as Vixie cron runs the job once.
func TestTickSkipsTheRepeatedHour(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 1)
	url, _ := f.artifact("app", "x")
	sc := &store.Schedule{ID: engine.NewScheduleID(), Application: "web", Environment: "prod", Cron: "CRON_TZ=Europe/Rome 30 2 * * *",
		Descriptor: []byte(descriptorYAML("web", "prod", "1", url, "", "")), Requester: "token:test", CreatedAt: time.Now()}
	if err := f.st.InsertSchedule(context.Background(), sc, 0); err != nil {
		t.Fatal(err)
	}
	cest := time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC)
	first := f.tick(sc.ID, cest)
	second, err := f.eng.Tick(context.Background(), sc.ID, cest.Add(time.Hour))
	if err != nil || second != "" {
		t.Fatalf("the repeated 02:30: %q %v, want no deploy", second, err)
	}
	if _, err := f.st.Deployment(context.Background(), engine.TickDeployID(sc.ID, cest.Add(time.Hour))); err == nil {
		t.Fatal("the repeated 02:30 created a deploy")
	}
	if rec := f.wait(first, 60*time.Second); rec.State != manent.StateSuccess {
		t.Fatalf("the first 02:30: %s (%s)", rec.State, rec.Error)
	}
	// The next day's 02:30 runs.
	f.tick(sc.ID, cest.Add(25*time.Hour))
}

// A refused tick creates no deploy, and the schedule names none as its
// last: it named the id the tick would have had, which status answered
// "not found"; the last error says why.
func TestRefusedTickNamesNoDeploy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 1)
	url, _ := f.artifact("app", "x")
	id := f.schedule(descriptorYAML("web", "prod", "1", url, "", "steps:\n  - {name: odd, after: deploy, plugin: nope}\n"))
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	got, err := f.eng.Tick(context.Background(), id, at)
	if err != nil || got != "" {
		t.Fatalf("refused tick: %q %v, want no deploy", got, err)
	}
	sc, err := f.st.GetSchedule(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if sc.LastDeploy != "" || sc.LastError == "" {
		t.Fatalf("schedule after a refused tick: last deploy %q, last error %q; want none and why", sc.LastDeploy, sc.LastError)
	}
}

// createSchedule is what the server does: the schedule of yml, with the
// request's Idempotency-Key (token:test, key) recorded in its transaction.
func (f *fixture) createSchedule(id, key string) error {
	f.t.Helper()
	return f.createScheduleAt(id, key, "@hourly")
}

// createScheduleAt is createSchedule firing at cron: two schedules of one
// environment at the same times are refused (admit.SameSchedule).
func (f *fixture) createScheduleAt(id, key, cron string) error {
	f.t.Helper()
	url, _ := f.artifact("app", "x")
	sc := &store.Schedule{ID: id, Application: "web", Environment: "prod", Cron: cron,
		Descriptor: []byte(descriptorYAML("web", "prod", "1", url, "", "")), Requester: "token:test", CreatedAt: time.Now()}
	return f.eng.CreateSchedule(context.Background(), sc, func(tx *sql.Tx) error {
		return f.st.RecordIdempotency(context.Background(), tx, store.Idempotency{Identity: "token:test", Key: key,
			BodySHA256: "digest", Status: 201, Response: []byte(`{"schedule":"` + id + `"}`)})
	})
}

// A schedule the DBOS scheduler refuses is not recorded, and neither is
// its Idempotency-Key: a retry with the key was answered 201 with a
// schedule that was not there.
func TestScheduleRegistrationRefusedRecordsNothing(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 1)
		id := engine.NewScheduleID()
		if err := f.eng.CreateDBOSSchedule(id); err != nil { // the registration then fails: the name is taken
			t.Fatal(err)
		}
		if err := f.createSchedule(id, "k1"); err == nil {
			t.Fatal("CreateSchedule with its DBOS schedule name taken succeeded")
		}
		ctx := context.Background()
		if rec, err := f.st.Idempotent(ctx, "token:test", "k1"); err != nil || rec != nil {
			t.Fatalf("Idempotency-Key after a refused registration: %+v %v, want none", rec, err)
		}
		if sc, err := f.st.GetSchedule(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("schedule after a refused registration: %+v %v, want none", sc, err)
		}
	})
}

// A server killed as a schedule commits (kill -9, here a hook that stops
// CreateSchedule there) leaves a schedule the DBOS scheduler fires after
// the restart: it was listed by GET /api/v1/schedules and never fired.
func TestScheduleCommittedIsRegistered(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 1)
		type killed struct{}
		engine.SetScheduleCommitHook(func(string) { panic(killed{}) })
		t.Cleanup(func() { engine.SetScheduleCommitHook(nil) })
		id := engine.NewScheduleID()
		func() {
			defer func() {
				if r := recover(); r != nil {
					if _, ok := r.(killed); !ok {
						panic(r)
					}
				}
			}()
			if err := f.createSchedule(id, "k1"); err != nil {
				t.Fatal(err)
			}
		}()
		engine.SetScheduleCommitHook(nil)
		f.restart()
		ctx := context.Background()
		if _, err := f.st.GetSchedule(ctx, id); err != nil {
			t.Fatalf("schedule after the restart: %v", err)
		}
		if rec, err := f.st.Idempotent(ctx, "token:test", "k1"); err != nil || rec == nil {
			t.Fatalf("Idempotency-Key after the restart: %+v %v, want it", rec, err)
		}
		got, err := f.eng.DBOSSchedule(id)
		if err != nil {
			t.Fatalf("the DBOS scheduler after the restart: %v; the schedule never fires", err)
		}
		if got.Status != dbos.ScheduleStatusActive || got.WorkflowName != engine.TickWorkflow {
			t.Fatalf("DBOS schedule %s: %s of %s, want ACTIVE of %s", id, got.Status, got.WorkflowName, engine.TickWorkflow)
		}
	})
}

// refuseDBOSScheduleDeletes makes the database refuse every delete of a
// DBOS schedule (a trigger): the DBOS part of a schedule's deletion fails.
// The returned function lifts the refusal.
func (f *fixture) refuseDBOSScheduleDeletes() (lift func()) {
	f.t.Helper()
	ctx := context.Background()
	create := []string{`CREATE TRIGGER refuse_schedule_delete BEFORE DELETE ON workflow_schedules
		BEGIN SELECT RAISE(ABORT, 'schedule deletes refused by the test'); END`}
	drop := []string{`DROP TRIGGER refuse_schedule_delete`}
	if f.st.Postgres() {
		create = []string{`CREATE FUNCTION dbos.refuse_schedule_delete() RETURNS trigger LANGUAGE plpgsql AS
			$$BEGIN RAISE EXCEPTION 'schedule deletes refused by the test'; END$$`,
			`CREATE TRIGGER refuse_schedule_delete BEFORE DELETE ON dbos.workflow_schedules
			FOR EACH ROW EXECUTE FUNCTION dbos.refuse_schedule_delete()`}
		drop = []string{`DROP TRIGGER refuse_schedule_delete ON dbos.workflow_schedules`, `DROP FUNCTION dbos.refuse_schedule_delete()`}
	}
	for _, q := range create {
		if _, err := f.st.DB().ExecContext(ctx, q); err != nil {
			f.t.Fatal(err)
		}
	}
	return func() {
		f.t.Helper()
		for _, q := range drop {
			if _, err := f.st.DB().ExecContext(ctx, q); err != nil {
				f.t.Fatal(err)
			}
		}
	}
}

// A schedule whose removal from the DBOS scheduler fails stays as it
// was — listed, registered, without a schedule.delete audit entry — and
// a second try deletes all of it: the deletion was two commits, and a
// server killed between them left DBOS firing empty ticks of a schedule
// manent no longer listed.
func TestScheduleDeletionIsOneTransaction(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 1)
		ctx := context.Background()
		id := engine.NewScheduleID()
		if err := f.createSchedule(id, "k1"); err != nil {
			t.Fatal(err)
		}
		audit := func(tx *sql.Tx) error {
			return f.st.AppendAuditTx(ctx, tx, store.AuditEntry{Identity: "token:test", Action: "schedule.delete",
				Target: id, Outcome: "accepted"})
		}
		lift := f.refuseDBOSScheduleDeletes()
		if err := f.eng.DeleteSchedule(ctx, id, audit); err == nil {
			t.Fatal("DeleteSchedule succeeded while the DBOS scheduler refused the removal")
		}
		if sc, err := f.st.GetSchedule(ctx, id); err != nil || sc.DeletedAt != nil {
			t.Fatalf("schedule after a refused removal: err %v, deleted at %v; want it live", err, sc.DeletedAt)
		}
		if got, err := f.eng.DBOSSchedule(id); err != nil || got.Status != dbos.ScheduleStatusActive {
			t.Fatalf("DBOS schedule after a refused removal: %+v %v, want it active", got, err)
		}
		entries, err := f.st.Audit(ctx, store.AuditFilter{Action: "schedule.delete"})
		if err != nil || len(entries) != 0 {
			t.Fatalf("schedule.delete audit entries after a refused removal: %+v %v, want none", entries, err)
		}
		lift()
		if err := f.eng.DeleteSchedule(ctx, id, audit); err != nil {
			t.Fatal(err)
		}
		if sc, err := f.st.GetSchedule(ctx, id); err != nil || sc.DeletedAt == nil {
			t.Fatalf("schedule after its deletion: err %v, deleted at %v; want it deleted", err, sc.DeletedAt)
		}
		if got, err := f.eng.DBOSSchedule(id); !errors.Is(err, dbos.ErrScheduleNotFound) {
			t.Fatalf("DBOS schedule after its deletion: %+v %v, want none", got, err)
		}
		if entries, err := f.st.Audit(ctx, store.AuditFilter{Action: "schedule.delete"}); err != nil || len(entries) != 1 {
			t.Fatalf("schedule.delete audit entries: %+v %v, want one", entries, err)
		}
		if err := f.eng.DeleteSchedule(ctx, id, audit); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("deleting it again: %v, want not found", err)
		}
		if entries, err := f.st.Audit(ctx, store.AuditFilter{Action: "schedule.delete"}); err != nil || len(entries) != 1 {
			t.Fatalf("schedule.delete audit entries after a second deletion: %+v %v, want one", entries, err)
		}
	})
}

// countLines returns how many lines of logs hold both schedule and msg.
func countLines(logs *enginetest.SyncBuffer, msg, schedule string) int {
	n := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, msg) && strings.Contains(line, schedule) {
			n++
		}
	}
	return n
}

// A server of an older version, stopped between the two commits of a
// schedule's creation or deletion, left a schedule listed with no DBOS
// schedule (it never fires) or a DBOS schedule with no live schedule (its
// ticks deploy nothing). The next start mends both and says so once.
func TestScheduleSplitStateRepairedAtStart(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 1)
		logs := &enginetest.SyncBuffer{}
		f.log = slog.New(slog.NewJSONHandler(logs, nil))
		ctx := context.Background()
		schema := ""
		if f.st.Postgres() {
			schema = "dbos."
		}
		unregistered, deleted, unknown, kept := engine.NewScheduleID(), engine.NewScheduleID(), engine.NewScheduleID(), engine.NewScheduleID()
		for i, id := range []string{unregistered, deleted, kept} {
			if err := f.createScheduleAt(id, "k-"+id, fmt.Sprintf("%d * * * *", i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.eng.CreateDBOSSchedule(unknown); err != nil {
			t.Fatal(err)
		}
		// The split states, as an older server left them.
		if _, err := f.st.DB().ExecContext(ctx, `DELETE FROM `+schema+`workflow_schedules WHERE schedule_name = '`+unregistered+`'`); err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.DB().ExecContext(ctx, `UPDATE manent_schedules SET deleted_at = created_at WHERE id = '`+deleted+`'`); err != nil {
			t.Fatal(err)
		}
		f.restart()
		const registeredMsg, removedMsg = "registered a schedule with the DBOS scheduler again", "removed a schedule from the DBOS scheduler"
		for _, id := range []string{unregistered, kept} {
			got, err := f.eng.DBOSSchedule(id)
			if err != nil || got.Status != dbos.ScheduleStatusActive || got.WorkflowName != engine.TickWorkflow {
				t.Fatalf("DBOS schedule %s after the restart: %+v %v, want it active", id, got, err)
			}
		}
		for _, id := range []string{deleted, unknown} {
			if got, err := f.eng.DBOSSchedule(id); !errors.Is(err, dbos.ErrScheduleNotFound) {
				t.Fatalf("DBOS schedule %s after the restart: %+v %v, want none", id, got, err)
			}
		}
		if sc, err := f.st.GetSchedule(ctx, unregistered); err != nil || sc.DeletedAt != nil {
			t.Fatalf("schedule %s after the restart: err %v, deleted at %v; want it live", unregistered, err, sc.DeletedAt)
		}
		f.restart() // nothing more to mend
		for _, c := range []struct{ msg, id string }{
			{registeredMsg, unregistered}, {removedMsg, deleted}, {removedMsg, unknown},
			{registeredMsg, kept}, {removedMsg, kept},
		} {
			want := 1
			if c.id == kept {
				want = 0
			}
			if got := countLines(logs, c.msg, c.id); got != want {
				t.Errorf("log lines %q of %s over two restarts: %d, want %d", c.msg, c.id, got, want)
			}
		}
	})
}

// Ticks missed while no server ran are made up once: DBOS enqueues every
// missed tick at the restart, and each created a deploy (the earlier ones
// cancelled again by the later, each with its callback, chat message and
// audit entry) — a burst of deploys for one outage. Only the latest missed
// tick deploys.
func TestMissedTicksDeployOnce(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 1)
		ctx := context.Background()
		id := engine.NewScheduleID()
		if err := f.createSchedule(id, "k1"); err != nil { // @hourly
			t.Fatal(err)
		}
		// The schedule last fired 5 hours ago: the server was down since.
		schema := ""
		if f.st.Postgres() {
			schema = "dbos."
		}
		last := time.Now().Add(-5 * time.Hour).UTC().Format(time.RFC3339Nano)
		if _, err := f.st.DB().ExecContext(ctx, `UPDATE `+schema+`workflow_schedules SET last_fired_at = '`+last+`' WHERE schedule_name = '`+id+`'`); err != nil {
			t.Fatal(err)
		}
		f.restart()
		var ticks []time.Time
		enginetest.Eventually(t, 30*time.Second, func() bool {
			wfs, err := f.eng.TickWorkflows(id)
			if err != nil {
				t.Fatal(err)
			}
			done := 0
			ticks = ticks[:0]
			for _, wf := range wfs {
				if wf.Status == dbos.WorkflowStatusSuccess || wf.Status == dbos.WorkflowStatusError {
					done++
				}
				at, err := time.Parse(time.RFC3339, strings.TrimPrefix(wf.ID, "sched-"+id+"-"))
				if err != nil {
					t.Fatalf("tick workflow %s: %v", wf.ID, err)
				}
				ticks = append(ticks, at)
			}
			return len(wfs) >= 1 && done == len(wfs)
		}, "the tick workflows of the missed hours to end")
		slices.SortFunc(ticks, time.Time.Compare)
		var deployed []time.Time
		for _, at := range ticks {
			if _, err := f.st.Deployment(ctx, engine.TickDeployID(id, at)); err == nil {
				deployed = append(deployed, at)
			}
		}
		if len(deployed) != 1 || !deployed[0].Equal(ticks[len(ticks)-1]) {
			t.Fatalf("missed ticks %v deployed %v; want the latest only", ticks, deployed)
		}
	})
}

// A long outage leaves one row, not one a missed tick: DBOS's automatic
// backfill enqueued a tick workflow for every tick missed (a month of
// @hourly: 720; a week of "* * * * *": 10,080, in one transaction), each
// of which ran, read every later one, and was kept for retention.workflows
// — to deploy once. Only the latest missed tick is enqueued now (DBOS
// patch 13), and it deploys.
func TestMissedTicksOfALongOutageAreOneRow(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 1)
		ctx := context.Background()
		id := engine.NewScheduleID()
		if err := f.createSchedule(id, "k1"); err != nil { // @hourly
			t.Fatal(err)
		}
		schema := ""
		if f.st.Postgres() {
			schema = "dbos."
		}
		last := time.Now().Add(-30 * 24 * time.Hour).UTC().Format(time.RFC3339Nano)
		if _, err := f.st.DB().ExecContext(ctx, `UPDATE `+schema+`workflow_schedules SET last_fired_at = '`+last+`' WHERE schedule_name = '`+id+`'`); err != nil {
			t.Fatal(err)
		}
		f.restart()
		latest := time.Now().UTC().Truncate(time.Hour)
		enginetest.Eventually(t, 30*time.Second, func() bool {
			_, err := f.st.Deployment(ctx, engine.TickDeployID(id, latest))
			return err == nil
		}, "the deploy of the latest missed tick")
		wfs, err := f.eng.TickWorkflows(id)
		if err != nil {
			t.Fatal(err)
		}
		// The latest missed tick, and the next if an hour turned meanwhile.
		if len(wfs) > 2 {
			t.Fatalf("a month's outage of an @hourly schedule left %d tick workflows, want the latest missed tick's alone", len(wfs))
		}
	})
}

// A schedule deploys as its creator: once the creator's token is removed
// from auth.tokens (revoked), its ticks are refused and say why — they
// went on deploying as that token, which could no longer do anything
// itself.
func TestTickOfRevokedTokenRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 1, func(cfg *node.Config) {
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, auth.TokenConfig{Name: "ci", SHA256: auth.HashToken("ci-secret")})
		cfg.RBAC = append(cfg.RBAC, auth.RBACRule{Subjects: []string{"token:ci"}, Permissions: []string{string(auth.Admin)}})
	})
	ctx := context.Background()
	url, _ := f.artifact("app", "x")
	sc := &store.Schedule{ID: engine.NewScheduleID(), Application: "web", Environment: "prod", Cron: "@hourly",
		Descriptor: []byte(descriptorYAML("web", "prod", "1", url, "", "")), Requester: "token:ci", CreatedAt: time.Now()}
	if err := f.st.InsertSchedule(ctx, sc, 0); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	f.tick(sc.ID, at)
	f.cfg.Auth.Tokens = f.cfg.Auth.Tokens[:1] // ci revoked; its RBAC rule stays
	f.restart()
	if got, err := f.eng.Tick(ctx, sc.ID, at.Add(time.Hour)); err != nil || got != "" {
		t.Fatalf("tick of a revoked token's schedule: %q %v, want no deploy", got, err)
	}
	got, err := f.st.GetSchedule(ctx, sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "token:ci is no longer a token of this server"; !strings.Contains(got.LastError, want) {
		t.Fatalf("last error %q, want it to say %q", got.LastError, want)
	}
}

// A tick refused again for the same reason logs no second warning: a
// schedule every minute whose descriptor no longer passes wrote one
// warning a minute; its LAST ERROR keeps saying why.
func TestRefusedTicksWarnOncePerReason(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 1)
	logs := &enginetest.SyncBuffer{}
	f.log = slog.New(slog.NewJSONHandler(logs, nil))
	f.restart()
	url, _ := f.artifact("app", "x")
	id := f.schedule(descriptorYAML("web", "prod", "1", url, "", "steps:\n  - {name: odd, after: deploy, plugin: nope}\n"))
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for i := range 3 {
		if got, err := f.eng.Tick(context.Background(), id, at.Add(time.Duration(i)*time.Hour)); err != nil || got != "" {
			t.Fatalf("refused tick: %q %v, want no deploy", got, err)
		}
	}
	if n := countLines(logs, "schedule tick refused", id); n != 1 {
		t.Fatalf("%d warnings for three ticks refused for one reason, want 1", n)
	}
}

// An @every schedule's interval is counted by each worker's scheduler
// from when that worker installed it, so two workers (or one restarted)
// fire one period at two times: each was a tick of its own and a deploy
// of its own, twice an interval. Every tick of one period is one tick,
// on the grid counted from the schedule's creation.
func TestEveryTicksOfOnePeriodAreOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 1)
	ctx := context.Background()
	url, _ := f.artifact("app", "x")
	created := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	sc := &store.Schedule{ID: engine.NewScheduleID(), Application: "web", Environment: "prod", Cron: "@every 1h",
		Descriptor: []byte(descriptorYAML("web", "prod", "1", url, "", "")), Requester: "token:test", CreatedAt: created}
	if err := f.st.InsertSchedule(ctx, sc, 0); err != nil {
		t.Fatal(err)
	}
	want := engine.TickDeployID(sc.ID, created.Add(time.Hour))
	for _, fired := range []time.Duration{time.Hour + 13*time.Second, time.Hour + 20*time.Minute + 40*time.Second} {
		got, err := f.eng.Tick(ctx, sc.ID, created.Add(fired))
		if err != nil || got != want {
			t.Fatalf("tick fired %s after the creation: %q %v, want the deploy %s of the period", fired, got, err, want)
		}
	}
	if recs, err := f.st.UnfinishedWithPrefix(ctx, sc.ID+"@"); err != nil || len(recs) > 1 {
		t.Fatalf("deploys of one period: %d %v, want one", len(recs), err)
	}
}

// QA: a schedule deleted while one of its ticks was being admitted (after
// the tick read it live, before its submit) still deployed: the DELETE
// answered 204, and a deploy of the deleted schedule was created and ran
// after it. The submit now commits only while the schedule is live (the
// tick's outcome is written in its transaction, holding the schedule's
// row), so the tick creates nothing and records nothing.
func TestScheduleDeletedMidTickDeploysNothing(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 1)
		url, _ := f.artifact("app", "x")
		sch := f.schedule(descriptorYAML("web", "prod", "1", url, "", ""))
		var deleted atomic.Bool
		engine.SetReadFault(func(op string) error {
			if op == "tick admission" && !deleted.Swap(true) {
				if err := f.eng.DeleteSchedule(context.Background(), sch); err != nil {
					t.Errorf("delete the schedule mid-tick: %v", err)
				}
			}
			return nil
		})
		t.Cleanup(func() { engine.SetReadFault(nil) })
		at := time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC)
		id, err := f.eng.Tick(context.Background(), sch, at)
		if err != nil || id != "" {
			t.Fatalf("tick of a schedule deleted mid-tick: %q, %v; want no deploy, no error", id, err)
		}
		if !deleted.Load() {
			t.Fatal("the schedule was not deleted mid-tick")
		}
		if _, err := f.st.Deployment(context.Background(), engine.TickDeployID(sch, at)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the deploy of the deleted schedule's tick: %v, want none", err)
		}
		sc, err := f.st.GetSchedule(context.Background(), sch)
		if err != nil {
			t.Fatal(err)
		}
		if sc.DeletedAt == nil || sc.LastDeploy != "" || sc.LastError != "" {
			t.Errorf("schedule: deleted %v, last deploy %q, last error %q; want deleted, nothing recorded", sc.DeletedAt, sc.LastDeploy, sc.LastError)
		}
	})
}
