package engine

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plan"
)

// A worker silent past its cut-off between a step's admission and its
// action (paused there, or cut off) does not run the action: an in-process
// target's call would otherwise go out beside the attempt of the worker
// that took the deploy over. It waits, fenced, until the engine stops.
// A worker whose heartbeat is fresh runs it.
func TestCutOffWorkerRunsNoAction(t *testing.T) {
	ctx := context.Background()
	st, reg, adm := openParts(t, enginetest.Postgres(t))
	fenced := make(chan error, 1)
	e, err := New(ctx, st, Config{ExecutorID: "cutoff", DataDir: t.TempDir(), Plugins: reg, Admitter: adm,
		Heartbeat: 50 * time.Millisecond, DeadAfter: 300 * time.Millisecond, OnFenced: func(err error) { fenced <- err }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Shutdown(time.Second) })
	r := &run{e: e, in: plan.Input{ID: manent.NewDeploymentID()}, outputs: map[string]json.RawMessage{}}
	ran := false
	action := func(context.Context, *logWriter) (any, error) { ran = true; return nil, nil }

	// Fresh: the action runs. (Its end is not recorded: that needs a DBOS
	// step of a deploy workflow, which this test does not run.)
	e.live.lastOK.Store(int64(e.live.now()))
	if _, err := r.attempt(ctx, "noop", action, false, false, tries{n: 1, of: 1}); !ran {
		t.Fatalf("with a fresh heartbeat the action did not run: %v", err)
	}

	// Silent past the cut-off (166 ms): nothing runs.
	ran = false
	silentSince := time.Now()
	enginetest.Eventually(t, 10*time.Second, func() bool { return time.Since(silentSince) > e.cutOff() }, "the cut-off to pass")
	e.live.lastOK.Store(int64(e.live.now() - e.cutOff() - time.Millisecond))
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := r.attempt(sctx, "noop", action, false, false, tries{n: 1, of: 1}); !errors.Is(err, context.DeadlineExceeded) || ran {
		t.Fatalf("past the cut-off: ran %v, %v; want it not run, waiting until the engine stops", ran, err)
	}
	select {
	case err := <-fenced:
		if !errors.Is(err, ErrCutOff) {
			t.Fatalf("fenced with %v, want ErrCutOff", err)
		}
	default:
		t.Fatal("the worker past its cut-off was not fenced")
	}
}
