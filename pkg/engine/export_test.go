package engine

import (
	"context"
	"time"
)

// Tick runs the step of schedule's tick at, as the DBOS scheduler's tick
// workflow does: tests choose the tick times.
func (e *Engine) Tick(ctx context.Context, schedule string, at time.Time) (string, error) {
	return e.tickStep(ctx, schedule, at)
}

// SetGateEnqueueHook sets a function run before a gate enqueues its deploy
// (nil: none).
func SetGateEnqueueHook(f func(id string)) { gateEnqueueHook = f }
