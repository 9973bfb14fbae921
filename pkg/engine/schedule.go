package engine

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/manent-io/manent/pkg/cronspec"
	"github.com/manent-io/manent/pkg/manent"
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
// scheduler, which fires each tick once across all workers and backfills
// ticks missed while no worker ran.
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
	schedule, zone := spec.DBOS()
	register := func(tx *sql.Tx) error {
		err := dbos.CreateScheduleInTx(e.dbos, tx, dbos.ScheduleSpec{
			ScheduleName: sc.ID, Schedule: schedule, CronTimezone: zone, WorkflowName: TickWorkflow,
			Context: scheduleContext{Schedule: sc.ID}, AutomaticBackfill: true,
		})
		if err != nil {
			return fmt.Errorf("register with the DBOS scheduler: %w", err)
		}
		return nil
	}
	if err := e.st.InsertSchedule(ctx, sc, e.cfg.Admitter.SchedulesPerEnvironment(), append(also[:len(also):len(also)], register)...); err != nil {
		if errors.Is(err, store.ErrScheduleLimit) {
			return e.cfg.Admitter.ScheduleLimitError(sc.Application, sc.Environment)
		}
		return fmt.Errorf("create schedule: %w", err)
	}
	if scheduleCommitHook != nil {
		scheduleCommitHook(sc.ID)
	}
	return nil
}

// scheduleCommitHook, when set (tests), runs once CreateSchedule's
// transaction has committed.
var scheduleCommitHook func(id string)

// DeleteSchedule stops a schedule; deploys already created are unaffected.
func (e *Engine) DeleteSchedule(ctx context.Context, id string) error {
	ok, err := e.st.DeleteSchedule(ctx, id)
	if err != nil {
		return err
	}
	if !ok {
		return store.ErrNotFound
	}
	if err := dbos.DeleteSchedule(e.dbos, id); err != nil && !errors.Is(err, dbos.ErrScheduleNotFound) {
		return fmt.Errorf("delete schedule %s: %w", id, err)
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
func (e *Engine) tickStep(c context.Context, schedule string, at time.Time) (string, error) {
	sc, err := e.st.GetSchedule(c, schedule)
	if err != nil {
		return "", err
	}
	if sc.DeletedAt != nil {
		return "", nil
	}
	if spec, err := cronspec.Parse(sc.Cron); err == nil && sc.LastTick != nil && spec.Repeated(*sc.LastTick, at) {
		// The clocks went back: this wall-clock time has had its deploy.
		e.log.Info("schedule tick skipped: the clocks went back and this time already ran", "schedule", sc.ID,
			"tick", at, "previous", *sc.LastTick)
		return "", nil
	}
	id := TickDeployID(sc.ID, at)
	if _, err := e.st.Deployment(c, id); err == nil {
		// Created before a crash.
		return id, e.supersede(c, sc.ID, id, at)
	}
	terr := e.tick(c, sc, id)
	msg := ""
	if terr != nil {
		msg = terr.Error()
		e.log.Warn("schedule tick refused", "schedule", sc.ID, "tick", at, "error", terr)
	}
	if terr != nil {
		// No deploy: the schedule names none (its last error says why),
		// and the earlier ticks stay — nothing newer is there to run.
		return "", e.st.ScheduleTicked(c, sc.ID, at, "", msg)
	}
	if err := e.st.ScheduleTicked(c, sc.ID, at, id, msg); err != nil {
		return "", err
	}
	return id, e.supersede(c, sc.ID, id, at)
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
// the schedule's creator, and makes it durable.
func (e *Engine) tick(ctx context.Context, sc *store.Schedule, id string) error {
	adm, err := e.cfg.Admitter.Tick(ctx, sc, id)
	if err != nil {
		return err
	}
	if _, err := e.Submit(ctx, adm.Input, adm.Decision); err != nil {
		return err
	}
	e.log.Info("schedule tick submitted a deploy", "schedule", sc.ID, "deploy", id)
	return nil
}
