package dbos

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// [manent patch: a waiting workflow leaves its worker slot]
//
// A queue's WorkerConcurrency counts this executor's running executions of
// the queue's workflows. A workflow that waits durably for a long time (a
// human's approval, a maintenance window) counts all along, so a few such
// waits can take every slot of a worker and starve the queue. LeaveWorkerSlot
// takes the calling workflow out of that count until TakeWorkerSlot, which
// waits for a free slot. The workflow stays PENDING and keeps its partition:
// only the worker's own count (a local one) changes.

// The slot states of an active execution.
const (
	slotHeld    int32 = iota // counted, running
	slotLeft                 // not counted: waits durably
	slotWaiting              // counted by the queue runner, waits for a slot to run again
)

// slotGate serialises the queue runner's count-and-claim with
// TakeWorkerSlot's check-and-take, so that together they never hold more
// slots than the limit, and wakes the executions waiting for a slot.
type slotGate struct {
	mu    sync.Mutex
	sigMu sync.Mutex
	freed chan struct{} // closed when a slot may have been freed
}

// slotGate is the slot gate of the queue named name.
//
// A mutex, not a sync.Map: the race detector reported the gate's first
// use by one ending workflow racing with its creation by another (both
// ending at once on a fresh queue runner, PostgreSQL tests); under a lock
// the creation happens before every use, without a doubt.
func (qr *queueRunner) slotGate(name string) *slotGate {
	qr.slotGatesMu.Lock()
	defer qr.slotGatesMu.Unlock()
	g := qr.slotGates[name]
	if g == nil {
		if qr.slotGates == nil {
			qr.slotGates = map[string]*slotGate{}
		}
		g = &slotGate{freed: make(chan struct{})}
		qr.slotGates[name] = g
	}
	return g
}

// signal wakes the executions waiting for a slot of the gate's queue.
func (g *slotGate) signal() {
	g.sigMu.Lock()
	close(g.freed)
	g.freed = make(chan struct{})
	g.sigMu.Unlock()
}

func (g *slotGate) wait() <-chan struct{} {
	g.sigMu.Lock()
	defer g.sigMu.Unlock()
	return g.freed
}

// slotEntry is the active execution of the workflow of ctx, if it was
// dequeued from a queue.
func slotEntry(ctx Context) (*dbosContext, activeWorkflowEntry, bool) {
	c, ok := ctx.(*dbosContext)
	if !ok || c.activeExecutions == nil || c.queueRunner == nil {
		return nil, activeWorkflowEntry{}, false
	}
	ws, ok := c.Value(workflowStateKey).(*workflowState)
	if !ok || ws == nil || ws.isWithinStep {
		return nil, activeWorkflowEntry{}, false
	}
	v, ok := c.activeExecutions.Load(executionKey{workflowID: ws.workflowID, ownerXID: ws.ownerXID})
	if !ok {
		return nil, activeWorkflowEntry{}, false
	}
	e, ok := v.(activeWorkflowEntry)
	if !ok || e.queueName == "" || e.slot == nil {
		return nil, activeWorkflowEntry{}, false
	}
	return c, e, true
}

// LeaveWorkerSlot takes the calling workflow out of its queue's
// WorkerConcurrency count on this executor, until TakeWorkerSlot: call it
// from the workflow function (not a step) before a long durable wait. It
// does nothing for a workflow not dequeued from a queue, or called twice.
// The workflow keeps its partition (PartitionConcurrency counts it, as it
// stays PENDING).
func LeaveWorkerSlot(ctx Context) {
	c, e, ok := slotEntry(ctx)
	if !ok || !e.slot.CompareAndSwap(slotHeld, slotLeft) {
		return
	}
	c.queueRunner.slotGate(e.queueName).signal()
	c.queueRunner.wake(e.queueName)
}

// TakeWorkerSlot counts the calling workflow again in its queue's
// WorkerConcurrency after LeaveWorkerSlot, waiting until this executor
// runs fewer of the queue's workflows than the limit. While it waits the
// queue runner counts it, so it claims no new workflow before this one
// runs again. It returns the context's error if the context ends first.
func TakeWorkerSlot(ctx Context) error { return TakeWorkerSlotOrSay(ctx, nil) }

// TakeWorkerSlotOrSay is TakeWorkerSlot that calls waiting (when not nil)
// once, from the calling goroutine and outside any lock, the first time it
// finds every slot taken and is about to wait: the caller can say why the
// workflow does not go on. DBOS records nothing either way.
func TakeWorkerSlotOrSay(ctx Context, waiting func()) error {
	c, e, ok := slotEntry(ctx)
	if !ok || e.slot.Load() == slotHeld {
		return nil
	}
	e.slot.Store(slotWaiting)
	g := c.queueRunner.slotGate(e.queueName)
	for {
		g.mu.Lock()
		limit := -1
		if q, ok := c.queueRunner.currentQueueConfig(e.queueName); ok {
			if wc := q.resolveLimits().WorkerConcurrency; wc != nil {
				limit = *wc
			}
		}
		freed := g.wait()
		if limit < 0 || c.countActiveWorkflows(func(a activeWorkflowEntry) bool {
			return a.queueName == e.queueName && (a.slot == nil || a.slot.Load() == slotHeld)
		}) < limit {
			e.slot.Store(slotHeld)
			g.mu.Unlock()
			return nil
		}
		g.mu.Unlock()
		if waiting != nil {
			waiting()
			waiting = nil
		}
		// A freed slot signals; the timer covers a limit raised at run time.
		t := time.NewTimer(time.Second)
		select {
		case <-c.Done():
			t.Stop()
			e.slot.Store(slotHeld)
			return context.Cause(c)
		case <-freed:
		case <-t.C:
		}
		t.Stop()
	}
}

// newSlot is the slot state of a new active execution: held.
func newSlot() *atomic.Int32 { return new(atomic.Int32) }
