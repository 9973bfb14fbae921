package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/servertest"
)

// BenchmarkDORA answers GET /api/v1/metrics/dora?window=3650d over 50,000
// finished deploys on SQLite (one in ten failed, half of those after
// reaching the environment, some restored by their own rollback; six step
// rows each), through the API's handler in the benchmark's process. Beside
// ns/op and -benchmem's allocations it reports peak_heap_MB: the most the
// live heap (objects, garbage not yet collected included) rose above what
// it was before the request, sampled every 200 µs; and cpu_ms/op, the
// process's CPU time per request. Run it with:
//
//	go test ./pkg/server -run '^$' -bench BenchmarkDORA -benchmem -count 3
func BenchmarkDORA(b *testing.B) {
	const deploys = 50000
	srv := servertest.Start(b)
	seedDORABench(b, srv, deploys)
	req := func() *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/metrics/dora?window=3650d", nil)
		r.Header.Set("Authorization", "Bearer "+srv.Token)
		return r
	}
	// The figures once, as a check that the history is read.
	w := httptest.NewRecorder()
	srv.API.ServeHTTP(w, req())
	if w.Code != http.StatusOK {
		b.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var figures bytes.Buffer
	if err := json.Compact(&figures, w.Body.Bytes()); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s", figures.Bytes())
	var peak float64
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		stop := sampleHeap()
		began := cpuTime()
		b.StartTimer()
		w := httptest.NewRecorder()
		srv.API.ServeHTTP(w, req())
		b.StopTimer()
		cpu += cpuTime() - began
		peak = max(peak, stop())
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
		b.StartTimer()
	}
	b.ReportMetric(peak/(1<<20), "peak_heap_MB")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu_ms/op")
}

// cpuTime is the CPU time the process has used (user and system): on a
// loaded machine a steadier measure than ns/op. It includes the server's
// other goroutines and the heap sampler.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sampleHeap samples the heap's objects until the function it returns is
// called, which returns how far they rose above the first sample.
func sampleHeap() func() float64 {
	read := func() float64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(s)
		return float64(s[0].Value.Uint64())
	}
	base := read()
	var top atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			if v := uint64(read()); v > top.Load() {
				top.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 {
		close(done)
		wg.Wait()
		if v := uint64(read()); v > top.Load() {
			top.Store(v)
		}
		return max(float64(top.Load())-base, 0)
	}
}

// seedDORABench writes n finished deploys, one a minute up to now, straight
// into the tables, over 20 applications/environments.
func seedDORABench(b testing.TB, srv *servertest.Server, n int) {
	b.Helper()
	ctx := context.Background()
	base := time.Now().Add(-time.Duration(n+1) * time.Minute).UTC()
	at := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000000Z") }
	err := srv.Store.Tx(ctx, func(tx *sql.Tx) error {
		// Each statement prepared once: the write pool's connections
		// cache them (pkg/store/stmtcache.go). A statement prepared in the
		// transaction (tx.PrepareContext) would be closed by Commit after
		// the writer it ran on went to another transaction.
		const dep = `INSERT INTO manent_deployments (id, application, environment, version, state, requester,
			created_at, started_at, finished_at, input, committed_at, rollback, restored_at) VALUES (?, ?, ?, ?, ?, 'token:seed', ?, ?, ?, '{}', ?, ?, ?)`
		const step = `INSERT INTO manent_steps (deployment_id, position, name, state, started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?)`
		names := []string{"config", "secrets", "artifacts", "deploy", "activation", "cleanup"}
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("dpl_bench_%06d", i)
			created := base.Add(time.Duration(i) * time.Minute)
			finished := created.Add(50 * time.Second)
			state, failedAt, rollback := "SUCCESS", -1, ""
			var committed, restored any
			switch {
			case i%20 == 0: // refused at config: never reached the environment
				state, failedAt = "ERROR", 0
			case i%20 == 10: // failed deploying, restored by its rollback
				state, failedAt, rollback = "ERROR", 3, "completed"
			case i%97 == 0:
				state, failedAt = "CANCELLED", 5
			case i%3 == 0:
				committed = at(created.Add(-time.Hour))
			}
			if state != "SUCCESS" && i%40 == 0 {
				restored = at(finished.Add(20 * time.Minute))
			}
			if _, err := tx.ExecContext(ctx, dep, id, fmt.Sprintf("app-%d", i%10), fmt.Sprintf("env-%d", i%2), fmt.Sprint(i), state,
				at(created), at(created), at(finished), committed, rollback, restored); err != nil {
				return err
			}
			for p, name := range names {
				st := "SUCCESS"
				switch {
				case p == failedAt:
					st = "ERROR"
				case failedAt >= 0 && p > failedAt:
					st = "PENDING"
				}
				started := created.Add(time.Duration(p) * 5 * time.Second)
				if _, err := tx.ExecContext(ctx, step, id, p, name, st, at(started), at(started.Add(4*time.Second))); err != nil {
					return err
				}
			}
			if rollback != "" {
				started := created.Add(40 * time.Second)
				if _, err := tx.ExecContext(ctx, step, id, len(names), "rollback:deploy", "SUCCESS", at(started), at(started.Add(5*time.Second))); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
