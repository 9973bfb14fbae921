package engine

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/manent-io/manent/pkg/cronspec"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/retry"
	"github.com/manent-io/manent/pkg/store"
)

// TickWorkflow is the workflow each schedule tick runs (DBOS scheduler).
const TickWorkflow = "manent.tick"

// scheduleContext is what DBOS hands each tick of a schedule.
type scheduleContext struct {
	Schedule string `json:"schedule"`
}

// NewScheduleID returns a new schedule id.
func NewScheduleID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "sch_" + hex.EncodeToString(b[:])
}

// TickDeployID is the id of the deploy a tick creates.
func TickDeployID(schedule string, at time.Time) string {
	return schedule + "@" + at.UTC().Format(time.RFC3339)
}

// CreateSchedule records a recurring deploy and registers it with the DBOS
// scheduler, which fires each tick once across all workers and, of the
// ticks missed while no worker ran, enqueues the latest (DBOS patch 13).
//
// The expression is read by pkg/cronspec (5 fields, CRON_TZ=, the @ forms;
// UTC by default) and handed to DBOS in its 6-field form with its zone.
//
// Each function of also runs in the transaction that records the
// schedule, and the DBOS
// registration is in it too: the schedule, what also writes (the
// request's Idempotency-Key and audit entry) and the registration commit
// together or not at all — a refused registration records no key that
// would answer a retry with a schedule that is not there, and a server
// killed mid-way leaves no schedule that is listed and never fires.
func (e *Engine) CreateSchedule(ctx context.Context, sc *store.Schedule, also ...func(*sql.Tx) error) error {
	spec, err := cronspec.Parse(sc.Cron)
	if err != nil {
		return manent.Errorf(manent.EInvalid, "schedule.cron %q: %v", sc.Cron, err)
	}
	register := func(tx *sql.Tx) error { return e.register(tx, sc.ID, spec) }
	// Admission refused one firing at the times of a live schedule of
	// the environment; a schedule created meanwhile (two submissions at
	// once) is refused here.
	var same *manent.FieldError
	unique := func(tx *sql.Tx) error {
		fe, err := e.cfg.Admitter.SameSchedule(ctx, tx, sc.Application, sc.Environment, sc.Cron, sc.ID)
		if err == nil && fe != nil {
			same, err = fe, errSameSchedule
		}
		return err
	}
	if err := e.st.InsertSchedule(ctx, sc, e.cfg.Admitter.SchedulesPerEnvironment(), append(also[:len(also):len(also)], unique, register)...); err != nil {
		if errors.Is(err, store.ErrScheduleLimit) {
			return e.cfg.Admitter.ScheduleLimitError(sc.Application, sc.Environment)
		}
		if errors.Is(err, errSameSchedule) {
			return e.cfg.Admitter.SameScheduleError(*same)
		}
		return fmt.Errorf("create schedule: %w", err)
	}
	if scheduleCommitHook != nil {
		scheduleCommitHook(sc.ID)
	}
	return nil
}

// errSameSchedule rolls back CreateSchedule's transaction: the schedule
// fires at the times of a live one of its environment.
var errSameSchedule = errors.New("a schedule fires at the same times")

// register registers schedule id of spec with the DBOS scheduler in tx.
func (e *Engine) register(tx *sql.Tx, id string, spec *cronspec.Spec) error {
	schedule, zone := spec.DBOS()
	err := dbos.CreateScheduleInTx(e.dbos, tx, dbos.ScheduleSpec{
		ScheduleName: id, Schedule: schedule, CronTimezone: zone, WorkflowName: TickWorkflow,
		Context: scheduleContext{Schedule: id}, AutomaticBackfill: true,
	})
	if err != nil {
		return fmt.Errorf("register with the DBOS scheduler: %w", err)
	}
	return nil
}

// repairSchedules mends, at start, what a server of an older version left
// between the two commits that created or deleted a schedule there: a
// DBOS schedule of the tick workflow with no live schedule (it fired empty
// ticks) is removed, and a live schedule with no DBOS schedule (listed,
// never fired) is registered again. Each is logged once, when mended.
//
// The reads are ordered so that a schedule created or deleted meanwhile
// by another server (whose two parts commit together) is never mended
// the wrong way: a DBOS schedule is judged by its row read after it, a
// row by the DBOS schedules read after it, and the registration commits
// only while the row is live (store.WhileScheduleLive).
func (e *Engine) repairSchedules(ctx context.Context) error {
	registered, err := dbos.ListSchedules(e.dbos, dbos.WithScheduleWorkflowNames(TickWorkflow))
	if err != nil {
		return fmt.Errorf("repair schedules: list the DBOS schedules: %w", err)
	}
	for _, ds := range registered {
		sc, err := e.st.GetSchedule(ctx, ds.ScheduleName)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("repair schedules: %w", err)
		}
		if err == nil && sc.DeletedAt == nil {
			continue
		}
		// A schedule never comes back once deleted or absent: no check
		// is needed in the transaction.
		if err := e.st.Tx(ctx, func(tx *sql.Tx) error { return dbos.DeleteScheduleInTx(e.dbos, tx, ds.ScheduleName) }); err != nil {
			return fmt.Errorf("repair schedules: remove DBOS schedule %s: %w", ds.ScheduleName, err)
		}
		why := "it was deleted"
		if sc == nil {
			why = "it does not exist"
		}
		e.log.Warn("removed a schedule from the DBOS scheduler that manent no longer has: a server stopped while deleting it left it firing ticks that deploy nothing",
			"schedule", ds.ScheduleName, "why", why)
	}
	live, err := e.st.Schedules(ctx)
	if err != nil {
		return fmt.Errorf("repair schedules: %w", err)
	}
	if len(live) == 0 {
		return nil
	}
	registered, err = dbos.ListSchedules(e.dbos, dbos.WithScheduleWorkflowNames(TickWorkflow))
	if err != nil {
		return fmt.Errorf("repair schedules: list the DBOS schedules: %w", err)
	}
	have := make(map[string]bool, len(registered))
	for _, ds := range registered {
		have[ds.ScheduleName] = true
	}
	for _, sc := range live {
		if have[sc.ID] {
			continue
		}
		spec, err := cronspec.Parse(sc.Cron)
		if err != nil {
			e.log.Error("a schedule is not registered with the DBOS scheduler and its expression does not parse: it does not fire; delete it and create it again",
				"schedule", sc.ID, "cron", sc.Cron, "error", err)
			continue
		}
		ok, err := e.st.WhileScheduleLive(ctx, sc.ID, func(tx *sql.Tx) error { return e.register(tx, sc.ID, spec) })
		if err != nil {
			if _, gerr := dbos.GetSchedule(e.dbos, sc.ID); gerr == nil {
				continue // another server starting registered it meanwhile
			}
			return fmt.Errorf("repair schedules: register %s: %w", sc.ID, err)
		}
		if ok {
			e.log.Warn("registered a schedule with the DBOS scheduler again: a server stopped while creating or deleting it left it listed and never firing",
				"schedule", sc.ID, "application", sc.Application, "environment", sc.Environment, "cron", sc.Cron)
		}
	}
	return nil
}

// scheduleCommitHook, when set (tests), runs once CreateSchedule's
// transaction has committed.
var scheduleCommitHook func(id string)

// DeleteSchedule stops a schedule; deploys already created are unaffected.
//
// The schedule's row, what each function of also writes (the server's
// audit entry) and its removal from the DBOS scheduler commit in one
// transaction (DBOS patch 12, DeleteScheduleInTx): a refused removal
// leaves the schedule as it was, and a server killed mid-way leaves no
// DBOS schedule firing empty ticks of a schedule manent no longer lists,
// nor a listed schedule that no longer fires.
func (e *Engine) DeleteSchedule(ctx context.Context, id string, also ...func(*sql.Tx) error) error {
	unregister := func(tx *sql.Tx) error {
		if err := dbos.DeleteScheduleInTx(e.dbos, tx, id); err != nil {
			return fmt.Errorf("remove from the DBOS scheduler: %w", err)
		}
		return nil
	}
	ok, err := e.st.DeleteSchedule(ctx, id, append(also[:len(also):len(also)], unregister)...)
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", id, err)
	}
	if !ok {
		return store.ErrNotFound
	}
	return nil
}

// tickWorkflow creates the deploy of one tick. Its DBOS id is unique per
// tick, and the deploy id too: a tick never runs twice.
func (e *Engine) tickWorkflow(ctx dbos.Context, in dbos.ScheduledWorkflowInput) (string, error) {
	sctx, err := dbos.DecodeScheduleContext[scheduleContext](in)
	if err != nil {
		return "", err
	}
	return dbos.RunAsStep(ctx, func(c context.Context) (string, error) {
		return e.tickStep(c, sctx.Schedule, in.ScheduledTime)
	}, dbos.WithStepName("tick"), dbos.WithStepMaxRetries(3))
}

// tickStep creates the deploy of schedule's tick at, then supersedes the
// earlier ticks still waiting. Run again after a crash, it supersedes what
// the crash left waiting and creates nothing twice.
//
// A database away (a storage fault of any of its reads and writes, or of
// the admission's reads of the store and the submit) is waited for, as a
// deploy's steps do (recordEndRetry: up to 2 minutes), then fails the
// step, which DBOS runs again: the step's own 3 retries (0.7 s in all)
// lost the tick in an outage longer than that, and a fault at the submit
// was taken for a refusal, shown as the schedule's last error. Each try
// starts from the schedule and looks for the tick's deploy first, so a
// submit whose commit was lost creates nothing twice (the deploy id is
// the tick's, UNIQUE).
func (e *Engine) tickStep(c context.Context, schedule string, at time.Time) (string, error) {
	var (
		id   string
		last error
	)
	err := recordEndRetry.Do(c, func(int) error {
		var err error
		id, err = e.tickOnce(c, schedule, at)
		last = err
		if err == nil || store.AsFault(err) == nil || c.Err() != nil {
			return retry.Stop(err)
		}
		e.log.Warn("a schedule tick found the database away; retrying", "schedule", schedule, "tick", at, "error", err)
		return err
	})
	if err != nil && c.Err() != nil {
		err = last // c ended while waiting: the storage fault, as before
	}
	return id, err
}

// tickOnce is one try of tickStep. The errors it returns are the
// database's (a refusal of the tick is recorded on the schedule instead),
// the admission's only when a storage fault (*store.Fault): a provider
// that cannot be reached refuses the tick as before.
func (e *Engine) tickOnce(c context.Context, schedule string, at time.Time) (string, error) {
	if err := injectedFault("tick schedule"); err != nil {
		return "", err
	}
	sc, err := e.st.GetSchedule(c, schedule)
	if err != nil {
		return "", err
	}
	if sc.DeletedAt != nil {
		return "", nil
	}
	fired := at
	if spec, err := cronspec.Parse(sc.Cron); err == nil {
		if sc.LastTick != nil && spec.Repeated(*sc.LastTick, at) {
			// The clocks went back: this wall-clock time has had its deploy.
			e.log.Info("schedule tick skipped: the clocks went back and this time already ran", "schedule", sc.ID,
				"tick", at, "previous", *sc.LastTick)
			return "", nil
		}
		// @every: the ticks of one period, fired by several workers
		// (or before and after a restart), are one.
		at = spec.Period(sc.CreatedAt, at)
	}
	id := TickDeployID(sc.ID, at)
	// A failed read is no "not created yet": the deploy submitted again
	// would be refused (its id exists), the refusal recorded as the
	// schedule's last error, and the earlier ticks left waiting. The step
	// fails instead, and DBOS runs it again.
	if err := injectedFault("tick deploy"); err != nil {
		return "", err
	}
	if _, err := e.st.Deployment(c, id); err == nil {
		// Created before a crash, or by another worker's tick of the
		// period: its outcome is recorded too, as the run that created
		// it may have stopped (or failed to write) before recording it,
		// which left the schedule showing the tick before as its last.
		if err := e.tickOutcome(c, sc.ID, at, id, ""); err != nil {
			return "", err
		}
		return id, e.supersede(c, sc.ID, id, at)
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("read the deploy of tick %s: %w", id, err)
	}
	if later, err := e.laterTick(sc.ID, fired); err != nil {
		return "", err
	} else if !later.IsZero() {
		// A tick that could not start before the next was due (a
		// server stopped mid-tick); the later deploys, once.
		e.log.Info("schedule tick skipped: a later tick of the schedule is already due and deploys instead (ticks missed while no server ran are made up once)",
			"schedule", sc.ID, "tick", at, "later", later)
		return "", nil
	}
	terr, fault := e.tick(c, sc, id, at)
	if fault != nil {
		return "", fault
	}
	if errors.Is(terr, store.ErrScheduleDeleted) {
		// Deleted after this tick read it: its deploy rolled back.
		e.log.Info("schedule tick dropped: the schedule was deleted while its tick ran", "schedule", sc.ID, "tick", at)
		return "", nil
	}
	msg := ""
	if terr != nil {
		msg = terr.Error()
		// Once per reason: a schedule refused at every tick for one
		// reason says it on its LAST ERROR, not in a warning a tick.
		level := slog.LevelWarn
		if msg == sc.LastError {
			level = slog.LevelDebug
		}
		e.log.Log(c, level, "schedule tick refused", "schedule", sc.ID, "tick", at, "error", terr)
	}
	if terr != nil {
		// No deploy: the schedule names none (its last error says why),
		// and the earlier ticks stay — nothing newer is there to run.
		return "", e.tickOutcome(c, sc.ID, at, "", msg)
	}
	// The outcome committed with the deploy (tick).
	return id, e.supersede(c, sc.ID, id, at)
}

// tickOutcome records the outcome of schedule's tick at: its deploy, or
// why it was refused. The store keeps a later tick's outcome recorded
// meanwhile (another worker, or this tick run again late).
func (e *Engine) tickOutcome(c context.Context, schedule string, at time.Time, deploy, msg string) error {
	if err := injectedFault("tick outcome"); err != nil {
		return err
	}
	return e.st.ScheduleTicked(c, schedule, at, deploy, msg)
}

// laterTick returns the time of a tick of schedule after at that the DBOS
// scheduler has already enqueued (or run), or the zero time. Every tick
// workflow is named sched-<schedule>-<tick time, RFC 3339> by DBOS, and is
// created at or after its tick time: only those created after at are
// read.
func (e *Engine) laterTick(schedule string, at time.Time) (time.Time, error) {
	prefix := "sched-" + schedule + "-"
	wfs, err := dbos.ListWorkflows(e.dbos, dbos.WithFilterWorkflowIDPrefix(prefix), dbos.WithFilterCreatedAfter(at),
		dbos.WithFilterLoadInput(false), dbos.WithFilterLoadOutput(false))
	if err != nil {
		return time.Time{}, fmt.Errorf("the later ticks of %s: %w", schedule, err)
	}
	var latest time.Time
	for _, wf := range wfs {
		t, err := time.Parse(time.RFC3339, strings.TrimPrefix(wf.ID, prefix))
		if err == nil && t.After(at) && t.After(latest) {
			latest = t
		}
	}
	return latest, nil
}

// notStarted are the states of a deploy a later tick supersedes.
var notStarted = []manent.State{manent.StateDelayed, manent.StateWaitingDependency, manent.StateAwaitingApproval, manent.StateEnqueued}

// supersede cancels the deploys of schedule's ticks before at that have
// not started (notStarted): the tick id deploys the same descriptor with
// newer configuration. Each is flagged with the reason "superseded by
// <id>" and a deployment.supersede audit entry in one transaction, then
// ends CANCELLED with that reason, whoever ends it: this call, or the
// worker that picked it up meanwhile, at its first step. A running tick
// finishes; id waits behind it.
func (e *Engine) supersede(ctx context.Context, schedule, id string, at time.Time) error {
	prefix := schedule + "@"
	recs, err := e.st.UnfinishedWithPrefix(ctx, prefix)
	if err != nil {
		return fmt.Errorf("supersede the earlier ticks of %s: %w", schedule, err)
	}
	why := "superseded by " + id
	for _, r := range recs {
		if !slices.Contains(notStarted, r.State) {
			continue
		}
		t, err := time.Parse(time.RFC3339, strings.TrimPrefix(r.ID, prefix))
		if err != nil || !t.Before(at) {
			continue
		}
		old := r.ID
		_, set, err := e.cancel(ctx, old, store.CancelRequest{Reason: why, States: notStarted, Also: func(tx *sql.Tx) error {
			return e.st.AppendAuditTx(ctx, tx, store.AuditEntry{
				Identity: "system:manent", Action: "deployment.supersede", Target: old, RequestID: id,
				Outcome: "accepted", Detail: why + " (a later tick of schedule " + schedule + ")",
			})
		}})
		if manent.ErrorCode(err) == manent.EConflict {
			continue // ended meanwhile
		}
		if err != nil {
			return fmt.Errorf("supersede %s: %w", old, err)
		}
		if !set {
			continue // started meanwhile, or flagged already (a run before a crash, or a user's cancel)
		}
		e.log.Info("a schedule tick superseded an earlier one that had not started", "schedule", schedule, "deploy", old, "by", id)
	}
	return nil
}

// tick admits the deploy of one tick through every submission check, as
// the schedule's creator, and makes it durable. It returns why the tick is
// refused, or the storage fault that kept it from deciding: of the
// admission, its reads of the store (*store.Fault; a provider or an
// issuer that cannot be reached refuses), of the submit, any (it is the
// database's alone).
//
// The deploy and the tick's outcome on the schedule commit together, and
// only while the schedule is live (store.ScheduleTickedTx): a crash
// between the two left the schedule showing the tick before until the
// tick ran again, and a schedule deleted after the tick read it still
// deployed, after its DELETE was answered. A deleted schedule's tick is
// refused with store.ErrScheduleDeleted.
func (e *Engine) tick(ctx context.Context, sc *store.Schedule, id string, at time.Time) (refused, fault error) {
	adm, err := e.cfg.Admitter.Tick(ctx, sc, id)
	if ierr := injectedFault("tick admission"); ierr != nil {
		err = ierr
	}
	if err != nil {
		if isStoreFault(err) {
			return nil, err
		}
		return err, nil
	}
	ticked := func(tx *sql.Tx, _ *store.Record) error {
		if err := injectedFault("tick outcome"); err != nil {
			return err
		}
		return e.st.ScheduleTickedTx(ctx, tx, sc.ID, at, id)
	}
	if _, err := e.Submit(ctx, adm.Input, adm.Decision, ticked); err != nil {
		if f := store.AsFault(err); f != nil && manent.ErrorCode(err) == manent.EInternal {
			return nil, err
		}
		return err, nil
	}
	e.log.Info("schedule tick submitted a deploy", "schedule", sc.ID, "deploy", id)
	return nil, nil
}
