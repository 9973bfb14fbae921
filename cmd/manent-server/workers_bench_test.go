package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// BenchmarkWorkers measures deploys/s of no-op deploys (a file:// artifact,
// no target) through 1, 2 and 3 manent-server processes sharing one fresh
// PostgreSQL database: MANENT_BENCH_DEPLOYS deploys (default 120) over 12
// environments, submitted round-robin to the workers, timed from the first
// submit until all are SUCCESS. Run with -benchtime=1x; each iteration
// repeats the whole run.
func BenchmarkWorkers(b *testing.B) {
	if os.Getenv("MANENT_TEST_POSTGRES") == "" {
		b.Skip("MANENT_TEST_POSTGRES not set")
	}
	n := envIntB("MANENT_BENCH_DEPLOYS", 120)
	var base float64
	for _, workers := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			db := enginetest.Postgres(b)
			dir := b.TempDir()
			art := filepath.Join(dir, "app.txt")
			if err := os.WriteFile(art, []byte("release"), 0o644); err != nil {
				b.Fatal(err)
			}
			var ps []*proc
			for w := 0; w < workers; w++ {
				ps = append(ps, startArgs(b, nil, filepath.Join(dir, fmt.Sprintf("w%d", w)), db,
					fmt.Sprintf("MANENT_EXECUTOR_ID=bench-%d", w), "MANENT_LIMITS_SUBMISSIONS_PER_MINUTE=100000"))
			}
			desc := func(env string, v int) []byte {
				return []byte(fmt.Sprintf("apiVersion: manent/v1\napplication: bench\nenvironment: %s\nversion: \"%d\"\nartifact: {url: \"file://%s\"}\n", env, v, art))
			}
			var rate float64
			for it := 0; it < b.N; it++ {
				t0 := time.Now()
				ids := make([]string, n)
				var wg sync.WaitGroup
				errc := make(chan error, n)
				for i := 0; i < n; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						id, err := submitKeyed(ps[i%workers].addr, fmt.Sprintf("b%d-%d", it, i), desc(fmt.Sprintf("env-%d", i%12), it*n+i))
						if err != nil {
							errc <- err
							return
						}
						ids[i] = id
					}(i)
				}
				wg.Wait()
				close(errc)
				if err := <-errc; err != nil {
					b.Fatal(err)
				}
				c := ps[0].client()
				for _, id := range ids {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					d, err := c.Wait(ctx, id, 20*time.Millisecond)
					cancel()
					if err != nil {
						b.Fatalf("deploy %s: %v", id, err)
					}
					if d.State != manent.StateSuccess {
						b.Fatalf("deploy %s: %s %s", id, d.State, d.Error)
					}
				}
				rate = float64(n) / time.Since(t0).Seconds()
			}
			b.ReportMetric(rate, "deploys/s")
			if workers == 1 {
				base = rate
			}
			fmt.Printf("%d worker(s) on PostgreSQL: %d no-op deploys, %.1f deploys/s (×%.2f of 1 worker)\n", workers, n, rate, rate/max(base, 1e-9))
		})
	}
}
