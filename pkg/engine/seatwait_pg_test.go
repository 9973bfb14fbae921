package engine

import (
	"context"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/store"
)

// A worker that starts where another process of its executor id beat a
// moment ago from another seat (a machine or data directory replaced, a
// database restored from a dump taken seconds before) waits until that
// one has been silent for workers.dead_after. Its first beat is the
// registration that ends the wait, but the time of that beat was taken
// before the wait: with the defaults a wait of more than 16.7 s read as a
// silence past the cut-off, and the worker that had just registered
// stopped itself ("cut off … start it again") after recovering its
// deploys and starting their steps. It now counts from the registration
// that landed, and goes on beating.
func TestStartAfterWaitingForTheSeatIsNotCutOff(t *testing.T) {
	ctx := context.Background()
	st, reg, adm := openParts(t, enginetest.Postgres(t))
	const deadAfter = 600 * time.Millisecond
	fenced := make(chan error, 1)
	e, err := New(ctx, st, Config{ExecutorID: "seated", DataDir: t.TempDir(), Plugins: reg, Admitter: adm, Seat: "vm:/new/procs/seated.lock boot 2",
		Heartbeat: 50 * time.Millisecond, DeadAfter: deadAfter, OnFenced: func(err error) { fenced <- err }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Shutdown(time.Second) })
	// The previous process, on another machine, beat just now.
	if err := st.RegisterWorker(ctx, store.WorkerStart{ID: "seated", Version: "dev", AppVersion: WorkflowVersion,
		Instance: "old", Seat: "vm:/old/procs/seated.lock boot 1", DeadAfter: deadAfter}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := e.StartWorker(ctx); err != nil {
		t.Fatal(err)
	}
	// So that the test can fail: the wait was longer than the cut-off.
	if waited := time.Since(start); waited < e.cutOff() {
		t.Fatalf("the start waited %s, not past the cut-off %s", waited, e.cutOff())
	}
	first, err := st.LastBeat(ctx, "seated")
	if err != nil {
		t.Fatal(err)
	}
	// Three beats land after the registration, and the worker is never
	// fenced meanwhile.
	beats, last := 0, first.Last
	enginetest.Eventually(t, 10*time.Second, func() bool {
		select {
		case err := <-fenced:
			t.Fatalf("the worker stopped right after its start: %v (the wait for its seat read as silence)", err)
		default:
		}
		b, err := st.LastBeat(ctx, "seated")
		if err == nil && b.Last != last {
			beats, last = beats+1, b.Last
		}
		return beats >= 3
	}, "three heartbeats after the start")
	if e.live.isFenced() {
		t.Fatal("the worker is fenced")
	}
}
