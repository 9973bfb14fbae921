package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/store"
)

// takeOverSetup opens a store on url with workers a (leaving: to take
// over), b and c (alive).
func takeOverSetup(t *testing.T, url string) *store.Store {
	t.Helper()
	ctx := context.Background()
	st := openStore(t, url)
	for _, id := range []string{"a", "b", "c"} {
		if err := st.RegisterWorker(ctx, store.WorkerStart{ID: id, Version: "dev", AppVersion: "wf", Instance: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.LeaveWorker(ctx, "a", "a"); err != nil {
		t.Fatal(err)
	}
	return st
}

func worker(t *testing.T, st *store.Store, id string) store.Worker {
	t.Helper()
	ws, err := st.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.ID == id {
			return w
		}
	}
	t.Fatalf("no worker %s", id)
	return store.Worker{}
}

// takeOverResult is what a TakeOver returned.
type takeOverResult struct {
	ok  bool
	err error
}

// heldTakeOver starts by's takeover of victim (a claim for claimFor) and
// returns once its recover runs. recover then blocks until release is
// closed; done receives what TakeOver returned.
func heldTakeOver(st *store.Store, victim, by string, claimFor time.Duration) (release chan struct{}, done chan takeOverResult) {
	inside := make(chan struct{})
	release, done = make(chan struct{}), make(chan takeOverResult, 1)
	go func() {
		ok, err := st.TakeOver(context.Background(), victim, by, claimFor, func() error {
			close(inside)
			<-release
			return nil
		})
		done <- takeOverResult{ok, err}
	}()
	<-inside
	return release, done
}

// DBOS recovery takes connections of its own from the store's pool while
// TakeOver runs it: with a pool of 1 or 2 connections, a recover that
// holds that many at once (and writes through each) must succeed. When
// TakeOver held a transaction around recover, this timed out on
// PostgreSQL (the pool was exhausted) and on SQLite (the transaction held
// the write gate).
func TestTakeOverRecoverUsesThePool(t *testing.T) {
	for _, size := range []int{1, 2} {
		t.Run(fmt.Sprintf("pool%d", size), func(t *testing.T) {
			enginetest.Databases(t, func(t *testing.T, url string) {
				if strings.HasPrefix(url, "postgres") {
					url += fmt.Sprintf("&pool_max_conns=%d", size)
				}
				st := takeOverSetup(t, url)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				ok, err := st.TakeOver(ctx, "a", "b", time.Minute, func() error {
					var conns []*sql.Conn
					for range size {
						c, err := st.DB().Conn(ctx)
						if err != nil {
							return err
						}
						defer c.Close()
						conns = append(conns, c)
					}
					for _, c := range conns {
						if _, err := c.ExecContext(ctx, `UPDATE manent_workers SET version = 'touched' WHERE id = 'c'`); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil || !ok {
					t.Fatalf("TakeOver = %v, %v; want true, nil", ok, err)
				}
				if w := worker(t, st, "a"); w.State != store.WorkerDead || w.TakenOverBy != "b" || w.ClaimedBy != "" {
					t.Fatalf("a after the takeover: %+v; want dead, taken over by b, no claim", w)
				}
				if w := worker(t, st, "c"); w.Version != "touched" {
					t.Fatalf("recover's writes were lost: c is %+v", w)
				}
			})
		})
	}
}

// Two workers taking the same dead worker over at once: exactly one runs
// recover; the other returns at once (it does not wait for the first).
func TestTakeOverConcurrent(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, url string) {
		st := takeOverSetup(t, url)
		ctx := context.Background()
		// One takeover in progress (recover blocked): the other worker's
		// returns false without running recover.
		release, done := heldTakeOver(st, "a", "b", time.Minute)
		if w := worker(t, st, "a"); w.ClaimedBy != "b" || w.ClaimedUntil == nil {
			t.Fatalf("a while b takes it over: %+v; want claimed by b", w)
		}
		ok, err := st.TakeOver(ctx, "a", "c", time.Minute, func() error {
			t.Error("c recovered a while b did")
			return nil
		})
		if ok || err != nil {
			t.Fatalf("TakeOver by c during b's = %v, %v; want false, nil", ok, err)
		}
		close(release)
		if r := <-done; !r.ok || r.err != nil {
			t.Fatalf("b's TakeOver = %v, %v; want true, nil (it ran recover)", r.ok, r.err)
		}

		// A race: many takeovers of one leaving worker, started together.
		if err := st.RegisterWorker(ctx, store.WorkerStart{ID: "d", Version: "dev", AppVersion: "wf", Instance: "d"}); err != nil {
			t.Fatal(err)
		}
		if err := st.LeaveWorker(ctx, "d", "d"); err != nil {
			t.Fatal(err)
		}
		var runs, oks atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 8 {
			by := []string{"b", "c"}[i%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ok, err := st.TakeOver(ctx, "d", by, time.Minute, func() error {
					runs.Add(1)
					return nil
				})
				if err != nil {
					t.Error(err)
				}
				if ok {
					oks.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		if runs.Load() != 1 || oks.Load() != 1 {
			t.Fatalf("8 takeovers at once: recover ran %d times, %d reported it; want 1 and 1", runs.Load(), oks.Load())
		}
	})
}

// A recover that fails releases the claim: the next TakeOver runs it.
func TestTakeOverRecoverFails(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, url string) {
		st := takeOverSetup(t, url)
		ctx := context.Background()
		boom := errors.New("recovery failed")
		ok, err := st.TakeOver(ctx, "a", "b", time.Minute, func() error { return boom })
		if ok || !errors.Is(err, boom) {
			t.Fatalf("TakeOver with a failing recover = %v, %v; want false and its error", ok, err)
		}
		if w := worker(t, st, "a"); w.ClaimedBy != "" || w.TakenOverAt != nil || w.State != store.WorkerLeaving {
			t.Fatalf("a after a failed takeover: %+v; want leaving, no claim, not taken over", w)
		}
		runs := 0
		ok, err = st.TakeOver(ctx, "a", "c", time.Minute, func() error { runs++; return nil })
		if !ok || err != nil || runs != 1 {
			t.Fatalf("TakeOver after a failed one = %v, %v (recover ran %d times); want true, nil, once", ok, err, runs)
		}
		if w := worker(t, st, "a"); w.TakenOverBy != "c" {
			t.Fatalf("a: %+v; want taken over by c", w)
		}
	})
}

// A claimer that dies (is declared dead) mid-recovery, or stalls past its
// claim, does not block the takeover: another worker claims again and
// records it; the first one's late record is refused (ErrClaimLost).
// While a claim is live, the taken-over worker's own process starting
// again waits for it.
func TestTakeOverStaleClaim(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, url string) {
		st := takeOverSetup(t, url)
		ctx := context.Background()
		// A claim that went stale: the claimer's late record is refused.
		claimLost := func(by string, done chan takeOverResult) {
			t.Helper()
			if r := <-done; !r.ok || !errors.Is(r.err, store.ErrClaimLost) {
				t.Fatalf("TakeOver by %s = %v, %v; want true, ErrClaimLost", by, r.ok, r.err)
			}
		}

		// b claims a, then stops beating: c declares b dead and claims a.
		release, done := heldTakeOver(st, "a", "b", time.Hour)
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := st.RegisterWorker(rctx, store.WorkerStart{ID: "a", Version: "dev", AppVersion: "wf", Instance: "a"})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a starting again during b's live claim: %v; want it to wait (deadline exceeded)", err)
		}
		ok, err := st.TakeOver(ctx, "a", "c", time.Hour, func() error { t.Error("c ran recover during b's live claim"); return nil })
		if ok || err != nil {
			t.Fatalf("TakeOver during a live claim = %v, %v", ok, err)
		}
		var dead []string
		enginetest.Eventually(t, 10*time.Second, func() bool {
			if err := st.Heartbeat(ctx, "c", "c"); err != nil {
				t.Fatal(err)
			}
			dead, err = st.DeclareDead(ctx, 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			return worker(t, st, "b").State == store.WorkerDead
		}, "b declared dead (to take over: %v)", dead)
		runs := 0
		ok, err = st.TakeOver(ctx, "a", "c", time.Hour, func() error { runs++; return nil })
		if !ok || err != nil || runs != 1 {
			t.Fatalf("TakeOver of a claimed by dead b = %v, %v (recover ran %d times); want true, nil, once", ok, err, runs)
		}
		close(release)
		claimLost("b", done)
		if w := worker(t, st, "a"); w.TakenOverBy != "c" || w.ClaimedBy != "" {
			t.Fatalf("a: %+v; want taken over by c, no claim", w)
		}

		// c (alive, beating) claims e for 200ms and stalls: past that, d
		// claims e again.
		for _, id := range []string{"d", "e"} {
			if err := st.RegisterWorker(ctx, store.WorkerStart{ID: id, Version: "dev", AppVersion: "wf", Instance: id}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.LeaveWorker(ctx, "e", "e"); err != nil {
			t.Fatal(err)
		}
		release, done = heldTakeOver(st, "e", "c", 200*time.Millisecond)
		runs = 0
		enginetest.Eventually(t, 10*time.Second, func() bool {
			for _, id := range []string{"c", "d"} {
				if err := st.Heartbeat(ctx, id, id); err != nil {
					t.Fatal(err)
				}
			}
			ok, err = st.TakeOver(ctx, "e", "d", time.Hour, func() error { runs++; return nil })
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}, "d takes e over once c's claim expired")
		if runs != 1 {
			t.Fatalf("recover ran %d times, want once", runs)
		}
		if w := worker(t, st, "c"); w.State != store.WorkerAlive {
			t.Fatalf("c: %+v; want still alive", w)
		}
		close(release)
		claimLost("c", done)
		if w := worker(t, st, "e"); w.TakenOverBy != "d" {
			t.Fatalf("e: %+v; want taken over by d", w)
		}
	})
}

// A worker whose takeover claim went stale (its claimer died) starts
// again without waiting, and the stale claimer's late record does not
// mark it dead.
func TestRegisterWorkerAfterStaleClaim(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, url string) {
		st := takeOverSetup(t, url)
		ctx := context.Background()
		release, done := heldTakeOver(st, "a", "b", time.Hour)
		// b leaves (its claim is no longer live): a starts again at once.
		if err := st.LeaveWorker(ctx, "b", "b"); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := st.RegisterWorker(rctx, store.WorkerStart{ID: "a", Version: "dev", AppVersion: "wf", Instance: "a"}); err != nil {
			t.Fatalf("a starting again after its claimer left: %v", err)
		}
		close(release)
		if r := <-done; !errors.Is(r.err, store.ErrClaimLost) {
			t.Fatalf("b's late record: %v; want ErrClaimLost", r.err)
		}
		if w := worker(t, st, "a"); w.State != store.WorkerAlive || w.TakenOverAt != nil || w.ClaimedBy != "" {
			t.Fatalf("a: %+v; want alive, not taken over, no claim", w)
		}
		if err := st.Heartbeat(ctx, "a", "a"); err != nil {
			t.Fatalf("a's heartbeat: %v", err)
		}
	})
}
