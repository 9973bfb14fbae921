package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
)

// Tick runs the step of schedule's tick at, as the DBOS scheduler's tick
// workflow does: tests choose the tick times.
func (e *Engine) Tick(ctx context.Context, schedule string, at time.Time) (string, error) {
	return e.tickStep(ctx, schedule, at)
}

// RunTick runs schedule's tick workflow at, as the DBOS scheduler does
// (its workflow id, its step with the step's retries), and returns its
// result.
func (e *Engine) RunTick(ctx context.Context, schedule string, at time.Time) (string, error) {
	raw, err := json.Marshal(scheduleContext{Schedule: schedule})
	if err != nil {
		return "", err
	}
	h, err := dbos.RunWorkflow(e.dbos, e.tickWorkflow, dbos.ScheduledWorkflowInput{ScheduledTime: at, Context: raw},
		dbos.WithWorkflowID("sched-"+schedule+"-"+at.UTC().Format(time.RFC3339)))
	if err != nil {
		return "", err
	}
	return h.GetResult()
}

// SetSecretResolver replaces ResolveSecret in ResolveSecretWithin (nil:
// ResolveSecret again).
func SetSecretResolver(f func(ref string) (string, error)) {
	if f == nil {
		f = ResolveSecret
	}
	resolveSecret = f
}

// SetGateEnqueueHook sets a function run before a gate enqueues its deploy
// (nil: none).
func SetGateEnqueueHook(f func(id string)) { gateEnqueueHook = f }

// SetGateExpireHook sets a function run before a gate ends its deploy
// EXPIRED (nil: none).
func SetGateExpireHook(f func(id string)) { gateExpireHook = f }

// WorkflowStatus returns the DBOS status of workflow id.
func (e *Engine) WorkflowStatus(id string) (dbos.WorkflowStatusType, error) {
	return e.workflowStatus(id)
}

// StepFailure is stepFailure, for tests.
func StepFailure(err error) string { return stepFailure(err) }

// SweepWorkDirs is what the sweeper runs at start and hourly.
func (e *Engine) SweepWorkDirs(ctx context.Context) { e.sweepWorkDirs(ctx) }

// SetScheduleCommitHook sets a function run once CreateSchedule's
// transaction has committed (nil: none).
func SetScheduleCommitHook(f func(id string)) { scheduleCommitHook = f }

// DBOSSchedule returns the DBOS scheduler's schedule name.
func (e *Engine) DBOSSchedule(name string) (dbos.WorkflowSchedule, error) {
	return dbos.GetSchedule(e.dbos, name)
}

// CreateDBOSSchedule registers a schedule name of the tick workflow with
// the DBOS scheduler alone, firing on 1 January.
func (e *Engine) CreateDBOSSchedule(name string) error {
	return dbos.CreateSchedule(e.dbos, dbos.ScheduleSpec{ScheduleName: name, Schedule: "0 0 0 1 1 *",
		WorkflowName: TickWorkflow, Context: scheduleContext{Schedule: name}})
}

// TickWorkflows returns the DBOS workflows of schedule's ticks, without
// their input or output.
func (e *Engine) TickWorkflows(schedule string) ([]dbos.WorkflowStatus, error) {
	return dbos.ListWorkflows(e.dbos, dbos.WithFilterWorkflowIDPrefix("sched-"+schedule+"-"),
		dbos.WithFilterLoadInput(false), dbos.WithFilterLoadOutput(false))
}

// SetRetentionBatch sets how many deploys a retention batch takes, and how
// many it looks past (0: as it was); it returns what restores both.
func SetRetentionBatch(batch, scan int) (restore func()) {
	b, sc := retentionBatch, retentionScan
	retentionBatch, retentionScan = batch, scan
	return func() { retentionBatch, retentionScan = b, sc }
}

// SetDelayPoll bounds each wait of a DELAYED gate to d, as the releases
// before 2026-12-06 did with gatePoll (0: none, this release).
func SetDelayPoll(d time.Duration) { delayPoll.Store(int64(d)) }

// GateSteps returns the DBOS steps deploy id's gate recorded, with their
// output.
func (e *Engine) GateSteps(id string) ([]dbos.StepInfo, error) {
	return dbos.GetWorkflowSteps(e.dbos, gateID(id), dbos.WithStepsLoadOutput(true))
}

// RunSteps returns the DBOS steps of deploy id's run, with their outputs.
func (e *Engine) RunSteps(id string) ([]dbos.StepInfo, error) {
	return dbos.GetWorkflowSteps(e.dbos, id, dbos.WithStepsLoadOutput(true))
}

// RunningWorkflowIDs returns the IDs of every DBOS workflow that runs or
// waits, read without an ID filter (the tests of busyDeploys check its
// answer against this).
func (e *Engine) RunningWorkflowIDs() ([]string, error) {
	wfs, err := dbos.ListWorkflows(e.dbos, dbos.WithFilterStatus(dbos.WorkflowStatusPending, dbos.WorkflowStatusEnqueued),
		dbos.WithFilterLoadInput(false), dbos.WithFilterLoadOutput(false))
	ids := make([]string, len(wfs))
	for i, wf := range wfs {
		ids[i] = wf.ID
	}
	return ids, err
}

// CancelGateWorkflow cancels deploy id's gate workflow in DBOS alone, as
// an operator's DBOS tool would: the sweeper concludes the deploy.
func (e *Engine) CancelGateWorkflow(id string) error {
	return dbos.CancelWorkflow(e.dbos, gateID(id))
}
