package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/store"
)

// BenchmarkRetentionLooksPast measures one batch of retention.workflows
// when every old deploy still has a callback delivery running (a receiver
// that never answers, retention.workflows shorter than the retries): the
// batch looks past retentionScan of them. Sizes: MANENT_BENCH_RETENTION
// (default 1000,20000 such deploys); PostgreSQL when MANENT_TEST_POSTGRES
// is set.
//
// Seeding: the deploys' rows are copies of a real deploy's (seedCopies);
// each gets one PENDING workflow "<id>.callback-finished-0" in DBOS's
// workflow_status, of another executor, as a delivery that retries does.
//
// Run: go test ./pkg/engine -run '^$' -bench RetentionLooksPast -benchtime 5x -timeout 60m
func BenchmarkRetentionLooksPast(b *testing.B) {
	benchSizes(b, "MANENT_BENCH_RETENTION", []int{1000, 20000}, benchRetentionLooksPast)
}

func benchRetentionLooksPast(b *testing.B, url string, n int) {
	ctx := context.Background()
	e, st := openBench(b, url)
	seedCopies(b, e, st, n)
	table := "workflow_status"
	if st.Postgres() {
		table = "dbos.workflow_status"
	}
	now := time.Now().UnixMilli()
	for lo := 0; lo < n; lo += 1000 {
		var vals []string
		var args []any
		for i := lo; i < min(lo+1000, n); i++ {
			vals = append(vals, "(?, 'PENDING', 'manent.callback', 'elsewhere', ?, ?)")
			args = append(args, fmt.Sprintf("hist_%d.callback-finished-0", i), now, now)
		}
		if _, err := st.DB().ExecContext(ctx, rebind(st, `INSERT INTO `+table+
			` (workflow_uuid, status, name, executor_id, created_at, updated_at) VALUES `+strings.Join(vals, ", ")), args...); err != nil {
			b.Fatal(err)
		}
	}
	settle := "ANALYZE"
	if st.Postgres() {
		settle = "VACUUM ANALYZE"
	}
	if _, err := st.DB().ExecContext(ctx, settle); err != nil {
		b.Fatal(err)
	}
	e.cfg.Retention = Retention{Workflows: time.Minute}
	e.retentionFrom.Store(&store.RetentionMark{})
	later := time.Now().Add(time.Hour)
	// The first batches delete the seeding deploy's own workflows (it is
	// the newest, after those looked past).
	for deleted := 0; deleted == 0; {
		rep, err := e.retain(ctx, later)
		if err != nil {
			b.Fatal(err)
		}
		deleted = rep.Workflows
	}
	b.ResetTimer()
	start := time.Now()
	looked := 0
	for i := 0; i < b.N; i++ {
		rep, err := e.retain(ctx, later)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Workflows != 0 {
			b.Fatalf("a batch deleted the workflows of %d deploys whose delivery runs", rep.Workflows)
		}
		looked += rep.LookedPast
	}
	b.StopTimer()
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(per.Microseconds())/1000, "ms/batch")
	b.ReportMetric(float64(looked)/float64(b.N), "looked-past/batch")
	b.Logf("%d deploys with a delivery running: a batch took %s and looked past %d", n, per.Round(time.Millisecond), looked/b.N)
}
