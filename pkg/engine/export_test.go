package engine

import (
	"context"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
)

// Tick runs the step of schedule's tick at, as the DBOS scheduler's tick
// workflow does: tests choose the tick times.
func (e *Engine) Tick(ctx context.Context, schedule string, at time.Time) (string, error) {
	return e.tickStep(ctx, schedule, at)
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
