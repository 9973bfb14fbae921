package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/store"
)

// The worker table's rules: a silent worker is declared dead once, a dead
// worker's heartbeat fails (it never revives itself), a takeover runs once,
// a leaving worker is taken over without waiting, and a worker starting
// again is alive.
func TestWorkerLiveness(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, url string) {
		ctx := context.Background()
		st := openStore(t, url)
		for _, id := range []string{"a", "b", "c"} {
			if err := st.RegisterWorker(ctx, id, "dev", "wf"); err != nil {
				t.Fatal(err)
			}
		}
		if ids, err := st.DeclareDead(ctx, time.Hour); err != nil || len(ids) != 0 {
			t.Fatalf("DeclareDead(1h) = %v, %v: nobody is silent that long", ids, err)
		}
		if err := st.LeaveWorker(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		var silent []string
		enginetest.Eventually(t, 5*time.Second, func() bool {
			if err := st.Heartbeat(ctx, "b"); err != nil {
				t.Fatal(err)
			}
			silent, _ = st.DeclareDead(ctx, 500*time.Millisecond)
			return len(silent) == 2
		}, "a silent for 500ms (have %v)", silent)
		if silent[0] != "a" || silent[1] != "c" {
			t.Fatalf("to take over: %v, want [a c] (a silent, c leaving)", silent)
		}
		if err := st.Heartbeat(ctx, "a"); !errors.Is(err, store.ErrWorkerDead) {
			t.Fatalf("heartbeat of a dead worker: %v, want ErrWorkerDead", err)
		}
		runs := 0
		for i := range 2 {
			ok, err := st.TakeOver(ctx, "a", "b", time.Minute, func() error { runs++; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if ok != (i == 0) {
				t.Fatalf("TakeOver #%d reported %v", i+1, ok)
			}
		}
		if runs != 1 {
			t.Fatalf("recovery ran %d times, want once", runs)
		}
		if ok, err := st.TakeOver(ctx, "b", "c", time.Minute, func() error { t.Fatal("recovered a live worker"); return nil }); ok || err != nil {
			t.Fatalf("TakeOver of a live worker: %v, %v", ok, err)
		}
		if err := st.RegisterWorker(ctx, "a", "dev", "wf"); err != nil {
			t.Fatal(err)
		}
		ws, err := st.Workers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, w := range ws {
			got[w.ID] = w.State
		}
		if got["a"] != store.WorkerAlive || got["b"] != store.WorkerAlive || got["c"] != store.WorkerLeaving {
			t.Fatalf("states %v: want a alive again, b alive, c leaving", got)
		}
		if err := st.Heartbeat(ctx, "a"); err != nil {
			t.Fatalf("heartbeat after a restart: %v", err)
		}
	})
}
