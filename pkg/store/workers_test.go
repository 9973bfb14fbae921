package store_test

import (
	"context"
	"errors"
	"strings"
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
			if err := st.RegisterWorker(ctx, store.WorkerStart{ID: id, Version: "dev", AppVersion: "wf", Instance: id}); err != nil {
				t.Fatal(err)
			}
		}
		if ids, err := st.DeclareDead(ctx, time.Hour); err != nil || len(ids) != 0 {
			t.Fatalf("DeclareDead(1h) = %v, %v: nobody is silent that long", ids, err)
		}
		if err := st.LeaveWorker(ctx, "c", "c"); err != nil {
			t.Fatal(err)
		}
		var silent []string
		enginetest.Eventually(t, 5*time.Second, func() bool {
			if err := st.Heartbeat(ctx, "b", "b"); err != nil {
				t.Fatal(err)
			}
			silent, _ = st.DeclareDead(ctx, 500*time.Millisecond)
			return len(silent) == 2
		}, "a silent for 500ms (have %v)", silent)
		if silent[0] != "a" || silent[1] != "c" {
			t.Fatalf("to take over: %v, want [a c] (a silent, c leaving)", silent)
		}
		if err := st.Heartbeat(ctx, "a", "a"); !errors.Is(err, store.ErrWorkerDead) {
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
		if err := st.RegisterWorker(ctx, store.WorkerStart{ID: "a", Version: "dev", AppVersion: "wf", Instance: "a"}); err != nil {
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
		if err := st.Heartbeat(ctx, "a", "a"); err != nil {
			t.Fatalf("heartbeat after a restart: %v", err)
		}

		// A worker taken over is forgotten once that is older than asked;
		// one started again since (a) and one not taken over yet (c) are
		// kept.
		if n, err := st.ForgetWorkers(ctx, time.Hour); err != nil || n != 0 {
			t.Fatalf("ForgetWorkers(1h) = %d, %v: nothing was taken over that long ago", n, err)
		}
		if ok, err := st.TakeOver(ctx, "a", "b", time.Minute, func() error { return nil }); ok || err != nil {
			t.Fatalf("TakeOver of a restarted worker: %v, %v", ok, err)
		}
		if err := st.RegisterWorker(ctx, store.WorkerStart{ID: "d", Version: "dev", AppVersion: "wf", Instance: "d"}); err != nil {
			t.Fatal(err)
		}
		if err := st.LeaveWorker(ctx, "d", "d"); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.TakeOver(ctx, "d", "b", time.Minute, func() error { return nil }); !ok || err != nil {
			t.Fatalf("TakeOver of a leaving worker: %v, %v", ok, err)
		}
		var removed int64
		enginetest.Eventually(t, 5*time.Second, func() bool {
			n, err := st.ForgetWorkers(ctx, time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			removed += n
			return removed > 0
		}, "d, taken over, to be forgotten")
		ws, err = st.Workers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = map[string]string{}
		for _, w := range ws {
			got[w.ID] = w.State
		}
		if _, ok := got["d"]; ok || removed != 1 || got["a"] != store.WorkerAlive || got["c"] != store.WorkerLeaving {
			t.Fatalf("after ForgetWorkers: %v (%d removed), want d gone, a alive, c leaving", got, removed)
		}
		if err := st.Heartbeat(ctx, "d", "d"); !errors.Is(err, store.ErrWorkerDead) {
			t.Fatalf("heartbeat of a forgotten worker: %v, want ErrWorkerDead", err)
		}
	})
}

// One process per executor id (SPEC §11.3): on PostgreSQL a process
// starting with the id of a worker that still beats is refused, one whose
// predecessor fell silent waits for dead_after, and one on the same seat
// (holding its lock) takes the place at once; whoever takes the place, the
// previous process's heartbeat fails from then on, so it fences itself. On
// SQLite the database's file lock proves the previous process dead.
func TestExecutorIDHeldByOneProcess(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, url string) {
		ctx := context.Background()
		st := openStore(t, url)
		start := func(id, instance, seat string, deadAfter time.Duration, waiting func(time.Duration, string)) error {
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			return st.RegisterWorker(rctx, store.WorkerStart{ID: id, Version: "dev", AppVersion: "wf",
				Instance: instance, Seat: seat, DeadAfter: deadAfter, Waiting: waiting})
		}
		if err := start("a", "a1", "h1:/d/a.lock", time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		// a1 beats on while a2 starts elsewhere.
		beating, stop := make(chan error, 1), make(chan struct{})
		go func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				if err := st.Heartbeat(ctx, "a", "a1"); err != nil {
					beating <- err
					return
				}
				select {
				case <-stop:
					beating <- nil
					return
				case <-tick.C:
				}
			}
		}()
		waited := 0
		err := start("a", "a2", "h2:/d/a.lock", time.Hour, func(time.Duration, string) { waited++ })
		if st.Postgres() {
			var inUse *store.ExecutorInUseError
			if !errors.As(err, &inUse) || waited != 1 || !strings.Contains(err.Error(), "h1:/d/a.lock") {
				t.Fatalf("second process with a live worker's id: %v (waited %d), want ExecutorInUseError naming h1", err, waited)
			}
			close(stop)
			if err := <-beating; err != nil {
				t.Fatalf("the live worker lost its place: %v", err)
			}
			// The same seat: its lock proves a1 dead.
			if err := start("a", "a3", "h1:/d/a.lock", time.Hour, func(time.Duration, string) { t.Error("waited on its own seat") }); err != nil {
				t.Fatal(err)
			}
		} else {
			if err != nil {
				t.Fatalf("SQLite: %v", err)
			}
			select {
			case err := <-beating:
				if !errors.Is(err, store.ErrWorkerDead) {
					t.Fatalf("the replaced process's heartbeat: %v, want ErrWorkerDead", err)
				}
			case <-time.After(10 * time.Second):
				close(stop)
				t.Fatal("the replaced process's heartbeat still lands")
			}
		}
		if err := st.Heartbeat(ctx, "a", "a1"); !errors.Is(err, store.ErrWorkerDead) {
			t.Fatalf("the replaced process's heartbeat: %v, want ErrWorkerDead", err)
		}
		// Nor can it, stopping, hand the new process's deploys over.
		if err := st.LeaveWorker(ctx, "a", "a1"); err != nil {
			t.Fatal(err)
		}
		if b, err := st.LastBeat(ctx, "a"); err != nil || b.State != store.WorkerAlive {
			t.Fatalf("after the replaced process left: %+v, %v; want the new one alive", b, err)
		}
		if !st.Postgres() {
			return
		}
		// A predecessor that stopped beating (killed elsewhere): its place is
		// free once it has been silent for dead_after — its own when longer
		// (its lifeline stops its steps by then), so first one whose own is
		// an hour is still waited for after the newcomer's 300ms.
		if err := start("c", "c1", "h1:/d/c.lock", time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		err = st.RegisterWorker(short, store.WorkerStart{ID: "c", Version: "dev", AppVersion: "wf", Instance: "c2", Seat: "h2:/d/c.lock", DeadAfter: 300 * time.Millisecond})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("taking the place of a predecessor silent for less than its own dead_after (1h): %v, want to wait", err)
		}
		if err := start("b", "b1", "h1:/d/b.lock", 300*time.Millisecond, nil); err != nil {
			t.Fatal(err)
		}
		waited = 0
		if err := start("b", "b2", "h2:/d/b.lock", 300*time.Millisecond, func(time.Duration, string) { waited++ }); err != nil || waited != 1 {
			t.Fatalf("after a silent predecessor: %v (waited %d times)", err, waited)
		}
		if err := st.Heartbeat(ctx, "b", "b2"); err != nil {
			t.Fatal(err)
		}
	})
}

// A worker is declared dead only once its own dead_after has passed, when
// it is longer than the declaring worker's: workers configured differently
// (a valid heartbeat of 12s and dead_after of 1m beside a leader's 2s/10s)
// never take over a live one's deploys. A row of an earlier version (no
// dead_after recorded) goes by the declaring worker's.
func TestWorkerDeclaredDeadByItsOwnDeadAfter(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, url string) {
		ctx := context.Background()
		st := openStore(t, url)
		for id, d := range map[string]time.Duration{"patient": time.Hour, "legacy": 0} {
			if err := st.RegisterWorker(ctx, store.WorkerStart{ID: id, Version: "dev", AppVersion: "wf", Instance: id, DeadAfter: d}); err != nil {
				t.Fatal(err)
			}
		}
		if b, err := st.LastBeat(ctx, "patient"); err != nil || b.DeadAfter != time.Hour {
			t.Fatalf("patient's row: %+v %v, want its dead_after recorded", b, err)
		}
		var dead []string
		enginetest.Eventually(t, 10*time.Second, func() bool {
			var err error
			if dead, err = st.DeclareDead(ctx, 200*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			return len(dead) > 0
		}, "the legacy row to be declared dead")
		if len(dead) != 1 || dead[0] != "legacy" {
			t.Fatalf("declared dead: %v, want only legacy (patient's own dead_after is 1h)", dead)
		}
		if err := st.Heartbeat(ctx, "patient", "patient"); err != nil {
			t.Fatalf("patient's heartbeat: %v, want it alive", err)
		}
	})
}
