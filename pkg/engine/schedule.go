package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
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
func (e *Engine) CreateSchedule(ctx context.Context, sc *store.Schedule) error {
	spec, err := cronspec.Parse(sc.Cron)
	if err != nil {
		return manent.Errorf(manent.EInvalid, "schedule.cron %q: %v", sc.Cron, err)
	}
	if err := e.st.InsertSchedule(ctx, sc); err != nil {
		return fmt.Errorf("record schedule: %w", err)
	}
	schedule, zone := spec.DBOS()
	err = dbos.CreateSchedule(e.dbos, dbos.ScheduleSpec{
		ScheduleName: sc.ID, Schedule: schedule, CronTimezone: zone, WorkflowName: TickWorkflow,
		Context: scheduleContext{Schedule: sc.ID}, AutomaticBackfill: true,
	})
	if err != nil {
		_, _ = e.st.DeleteSchedule(context.WithoutCancel(ctx), sc.ID)
		return fmt.Errorf("create schedule: %w", err)
	}
	return nil
}

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
		sc, err := e.st.GetSchedule(c, sctx.Schedule)
		if err != nil {
			return "", err
		}
		if sc.DeletedAt != nil {
			return "", nil
		}
		id := TickDeployID(sc.ID, in.ScheduledTime)
		if _, err := e.st.Deployment(c, id); err == nil {
			return id, nil // created before a crash
		}
		terr := e.tick(c, sc, id)
		msg := ""
		if terr != nil {
			msg = terr.Error()
			e.log.Warn("schedule tick refused", "schedule", sc.ID, "tick", in.ScheduledTime, "error", terr)
		}
		if err := e.st.ScheduleTicked(c, sc.ID, in.ScheduledTime, id, msg); err != nil {
			return "", err
		}
		return id, nil
	}, dbos.WithStepName("tick"), dbos.WithStepMaxRetries(3))
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
