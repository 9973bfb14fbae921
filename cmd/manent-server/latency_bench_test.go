package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// BenchmarkLatency measures what a person feels (issue 19), against the
// real manent-server binary in local trial mode:
//
//   - idle: submit → first step started and submit → SUCCESS of a tiny
//     local deploy, from the server's own timestamps (created_at,
//     started_at, finished_at), medians over sequential deploys;
//   - mixed load: MANENT_BENCH_CLIENTS (default 50) clients submitting,
//     reading status, listing and calling /healthz while the deploys they
//     submit run, p50/p99 of each side by side in one run.
//
// The load is bounded in count (MANENT_BENCH_OPS per client, default 60)
// and time (60 s). It runs on SQLite, and on PostgreSQL when
// MANENT_TEST_POSTGRES is set. scripts/bench-latency.sh runs it.
func BenchmarkLatency(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { benchLatency(b, enginetest.SQLite(b)) })
	if os.Getenv("MANENT_TEST_POSTGRES") != "" {
		b.Run("postgres", func(b *testing.B) { benchLatency(b, enginetest.Postgres(b)) })
	}
}

func benchLatency(b *testing.B, db string) {
	dir := b.TempDir()
	// The load submits far more than the default 120 deploys a minute.
	p := startArgs(b, nil, filepath.Join(dir, "data"), db, "MANENT_EXECUTOR_ID=latency", "MANENT_LIMITS_SUBMISSIONS_PER_MINUTE=100000")
	art := filepath.Join(dir, "app.txt")
	if err := os.WriteFile(art, []byte("release"), 0o644); err != nil {
		b.Fatal(err)
	}
	desc := func(env string, v int) []byte {
		return []byte(fmt.Sprintf("apiVersion: manent/v1\napplication: lat\nenvironment: %s\nversion: \"%d\"\nartifact: {url: \"file://%s\"}\n", env, v, art))
	}
	c := p.client()
	hc := &http.Client{Timeout: 30 * time.Second}
	do := func(method, path string, body []byte) (int, []byte, error) {
		req, err := http.NewRequest(method, p.addr+path, bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer test-token")
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		return resp.StatusCode, out, err
	}
	waitDone := func(id string) *manent.Deployment {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		d, err := c.Wait(ctx, id, 5*time.Millisecond)
		if err != nil {
			b.Fatalf("deploy %s: %v", id, err)
		}
		if d.State != manent.StateSuccess {
			b.Fatalf("deploy %s: %s %s", id, d.State, d.Error)
		}
		return d
	}

	// Idle: one deploy at a time; the first one warms the server up.
	var start, success []time.Duration
	for i := 0; i < 21; i++ {
		id, err := submitKeyed(p.addr, fmt.Sprintf("idle-%d", i), desc("idle", i))
		if err != nil {
			b.Fatal(err)
		}
		d := waitDone(id)
		if i == 0 || d.StartedAt == nil || d.FinishedAt == nil {
			continue
		}
		start = append(start, d.StartedAt.Sub(d.CreatedAt))
		success = append(success, d.FinishedAt.Sub(d.CreatedAt))
	}
	b.ReportMetric(ms(pct(start, 50)), "idle-start-p50-ms")
	b.ReportMetric(ms(pct(success, 50)), "idle-success-p50-ms")
	fmt.Printf("%s idle, %d deploys: submit → start p50 %.1f ms (p90 %.1f); submit → SUCCESS p50 %.1f ms (p90 %.1f)\n",
		b.Name(), len(start), ms(pct(start, 50)), ms(pct(start, 90)), ms(pct(success, 50)), ms(pct(success, 90)))

	// Mixed load, paced: each client sends MANENT_BENCH_RATE requests a
	// second (default 10) for MANENT_BENCH_SECONDS (default 20), whatever
	// the answers' speed, so faster reads do not turn into more submits
	// (a closed loop would measure the write throughput instead).
	// MANENT_BENCH_SUBMIT_PCT of them submit (default 2: 10 deploys a
	// second at 50 clients); the rest read status, list and /healthz 5:3:2.
	clients := envIntB("MANENT_BENCH_CLIENTS", 50)
	rate := envIntB("MANENT_BENCH_RATE", 10)
	secs := envIntB("MANENT_BENCH_SECONDS", 20)
	submitPct := envIntB("MANENT_BENCH_SUBMIT_PCT", 2)
	ops := rate * secs
	period := time.Second / time.Duration(rate)
	deadline := time.Now().Add(time.Duration(secs)*time.Second + 30*time.Second)
	loadStart := time.Now()
	var mu sync.Mutex
	lat := map[string][]time.Duration{}
	var errs []string
	var ids []string
	var wg sync.WaitGroup
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			mine := ""
			next := time.Now().Add(time.Duration(rng.Int63n(int64(period))))
			for i := 0; i < ops && time.Now().Before(deadline); i++ {
				// The pace: wait for this request's slot (a timer, not a
				// synchronisation: the server is not waited for).
				if d := time.Until(next); d > 0 {
					<-time.After(d)
				}
				next = next.Add(period)
				var kind, method, path string
				var body []byte
				r := rng.Intn(100)
				rest := (r - submitPct) * 10 / max(1, 100-submitPct) // 0..9 past the submits
				switch {
				case r < submitPct || mine == "":
					kind, method, path = "submit", http.MethodPost, "/api/v1/deployments"
					body = desc(fmt.Sprintf("load-%d", w%10), w*1000+i)
				case rest < 5:
					kind, method, path = "status", http.MethodGet, "/api/v1/deployments/"+mine
				case rest < 8:
					kind, method, path = "list", http.MethodGet, "/api/v1/deployments?limit=20"
				default:
					kind, method, path = "healthz", http.MethodGet, "/healthz"
				}
				t0 := time.Now()
				code, out, err := do(method, path, body)
				d := time.Since(t0)
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, fmt.Sprintf("%s: %v", kind, err))
				case code >= 300:
					errs = append(errs, fmt.Sprintf("%s: %d %s", kind, code, out))
				default:
					lat[kind] = append(lat[kind], d)
					if kind == "submit" {
						if id := idOf(out); id != "" {
							mine = id
							ids = append(ids, id)
						}
					}
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	if len(errs) > 0 {
		b.Fatalf("%d requests failed, first: %s", len(errs), errs[0])
	}
	fmt.Printf("%s mixed load, %d clients × %d requests/s for %d s (%d%% submits), took %.1f s:\n",
		b.Name(), clients, rate, secs, submitPct, time.Since(loadStart).Seconds())
	for _, kind := range []string{"submit", "status", "list", "healthz"} {
		fmt.Printf("  %-8s n=%-5d p50 %6.1f ms  p99 %6.1f ms\n", kind, len(lat[kind]), ms(pct(lat[kind], 50)), ms(pct(lat[kind], 99)))
		b.ReportMetric(ms(pct(lat[kind], 99)), kind+"-p99-ms")
	}
	// Every deploy of the load ends: none is lost behind the load.
	for _, id := range ids {
		d := waitDoneAny(b, c, id)
		if !d.State.Final() {
			b.Fatalf("deploy %s is %s", id, d.State)
		}
	}
}

func waitDoneAny(b *testing.B, c *api.Client, id string) *manent.Deployment {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d, err := c.Wait(ctx, id, 50*time.Millisecond)
	if err != nil {
		b.Fatalf("deploy %s: %v", id, err)
	}
	return d
}

func idOf(body []byte) string {
	var res api.SubmitResult
	if json.Unmarshal(body, &res) != nil {
		return ""
	}
	return res.ID
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func envIntB(name string, def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv(name), &n); err == nil && n > 0 {
		return n
	}
	return def
}
