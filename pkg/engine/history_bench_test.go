package engine

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// BenchmarkHistory measures how manent's cost grows with its history
// (issue "a year of history"): for each size (MANENT_BENCH_HISTORY, default
// 1000,10000,50000 finished deploys) it seeds a fresh database, then in one
// run measures the engine's deploys/s against raw DBOS workflows/s, p50/p99
// of the reads behind the API (status, list unfiltered and with each
// filter, inventory, activity, a log replay) and the bytes per deploy.
//
// Seeding: one real no-op deploy runs through the engine; its rows in
// manent's tables (deployment, steps, events) are copied N times with new
// ids, environments and times — exactly what the engine writes. DBOS's
// tables are not copied: retention.workflows keeps only the working set
// there (docs/operations.md), which is the state this measures.
//
// Run: go test ./pkg/engine -run '^$' -bench History -benchtime 1x -timeout 60m
func BenchmarkHistory(b *testing.B) {
	benchSizes(b, "MANENT_BENCH_HISTORY", []int{1000, 10000, 50000}, benchHistory)
}

// benchSizes runs bench for each database (SQLite, PostgreSQL) and each size
// of history: the comma-separated list in the variable env, else sizes.
func benchSizes(b *testing.B, env string, sizes []int, bench func(b *testing.B, url string, n int)) {
	if v := os.Getenv(env); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				b.Fatalf("%s: %v", env, err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, db := range []string{"sqlite", "postgres"} {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/%d", db, n), func(b *testing.B) {
				url := enginetest.SQLite(b)
				if db == "postgres" {
					url = enginetest.Postgres(b)
				}
				bench(b, url, n)
			})
		}
	}
}

func benchHistory(b *testing.B, url string, n int) {
	ctx := context.Background()
	e, st := openBench(b, url)
	start := time.Now()
	seedCopies(b, e, st, n)
	b.Logf("seeded %d deploys in %s", n, time.Since(start).Round(time.Millisecond))
	var ids []string
	page, _, err := st.List(ctx, store.Filter{Limit: 500})
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range page {
		ids = append(ids, r.ID)
	}
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	anyID := func() string { return fmt.Sprintf("hist_%d", rng.IntN(n)) }
	for i := 0; i < b.N; i++ {
		mr, rr := e.rates(b, 200)
		b.ReportMetric(mr, "deploys/s")
		b.ReportMetric(rr, "raw-workflows/s")
		reads := []struct {
			name string
			fn   func() error
		}{
			{"status", func() error { _, err := e.Refresh(ctx, anyID()); return err }},
			{"list", func() error { _, _, err := st.List(ctx, store.Filter{}); return err }},
			{"list ?application", func() error {
				_, _, err := st.List(ctx, store.Filter{Application: fmt.Sprintf("app-%d", rng.IntN(20))})
				return err
			}},
			{"list ?environment (rare)", func() error { _, _, err := st.List(ctx, store.Filter{Environment: "env-rare"}); return err }},
			{"list ?state=ERROR", func() error {
				_, _, err := st.List(ctx, store.Filter{States: []manent.State{manent.StateError}})
				return err
			}},
			{"inventory", func() error { _, err := st.Inventory(ctx); return err }},
			{"activity", func() error { _, err := st.Unfinished(ctx); return err }},
			{"events replay", func() error { _, err := st.Events(ctx, anyID(), 0, nil, 0); return err }},
		}
		for _, r := range reads {
			// Warm up: the first calls after seeding read their pages
			// from disk into the connections' caches; a server that runs
			// has them warm.
			for j := 0; j < 20; j++ {
				if err := r.fn(); err != nil {
					b.Fatalf("%s: %v", r.name, err)
				}
			}
			var ds []time.Duration
			for j := 0; j < 200; j++ {
				t0 := time.Now()
				if err := r.fn(); err != nil {
					b.Fatalf("%s: %v", r.name, err)
				}
				ds = append(ds, time.Since(t0))
			}
			slices.Sort(ds)
			p50, p99 := ds[len(ds)/2], ds[len(ds)*99/100]
			b.ReportMetric(float64(p99.Microseconds())/1000, strings.ReplaceAll(r.name, " ", "_")+"-p99-ms")
			b.Logf("%-26s p50 %6.2f ms  p99 %6.2f ms", r.name, float64(p50.Microseconds())/1000, float64(p99.Microseconds())/1000)
		}
		size := dbSize(b, st)
		b.ReportMetric(float64(size)/float64(n+400), "bytes/deploy")
		b.Logf("%d deploys: manent %.1f deploys/s, raw DBOS %.1f workflows/s (ratio %.2f); database %.1f MB, %.1f KB per deploy",
			n, mr, rr, mr/rr, float64(size)/1e6, float64(size)/float64(n+400)/1e3)
		for _, t := range tableSizes(b, st) {
			b.Logf("  %-32s %8.1f MB  %6.2f KB per deploy", t.name, float64(t.bytes)/1e6, float64(t.bytes)/float64(n+400)/1e3)
		}
	}
	_ = ids
}

// seedCopies runs one deploy through the engine and copies its rows n times.
func seedCopies(b *testing.B, e *benchEngineT, st *store.Store, n int) {
	ctx := context.Background()
	mr, _ := e.rates(b, 1)
	_ = mr
	tmpl, _, err := st.List(ctx, store.Filter{Limit: 1})
	if err != nil || len(tmpl) != 1 {
		b.Fatalf("template deploy: %v", err)
	}
	id := tmpl[0].ID
	rowsOf := func(table, key string) ([]string, [][]any) {
		rows, err := st.DB().QueryContext(ctx, rebind(st, `SELECT * FROM `+table+` WHERE `+key+` = ?`), id)
		if err != nil {
			b.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		var out [][]any
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				b.Fatal(err)
			}
			out = append(out, vals)
		}
		return cols, out
	}
	type table struct {
		name string
		cols []string
		rows [][]any
	}
	var tables []table
	for _, t := range []struct{ name, key string }{{"manent_deployments", "id"}, {"manent_steps", "deployment_id"}, {"manent_events", "deployment_id"}} {
		cols, rows := rowsOf(t.name, t.key)
		tables = append(tables, table{t.name, cols, rows})
	}
	base := time.Now().Add(-time.Duration(n) * time.Minute)
	const batch = 1000
	for lo := 0; lo < n; lo += batch {
		err := st.Tx(ctx, func(tx *sql.Tx) error {
			stmts := map[string]*sql.Stmt{}
			for _, t := range tables {
				ph := make([]string, len(t.cols))
				for i := range ph {
					ph[i] = "?"
				}
				s, err := tx.PrepareContext(ctx, rebind(st, `INSERT INTO `+t.name+` (`+strings.Join(t.cols, ", ")+`) VALUES (`+strings.Join(ph, ", ")+`)`))
				if err != nil {
					return err
				}
				defer s.Close()
				stmts[t.name] = s
			}
			for i := lo; i < min(lo+batch, n); i++ {
				newID := fmt.Sprintf("hist_%d", i)
				at := base.Add(time.Duration(i) * time.Minute).UTC()
				env := fmt.Sprintf("env-%d", i%5)
				if i%1000 == 7 {
					env = "env-rare"
				}
				state := string(manent.StateSuccess)
				if i%20 == 0 {
					state = string(manent.StateError)
				}
				for _, t := range tables {
					for _, row := range t.rows {
						vals := slices.Clone(row)
						for c, col := range t.cols {
							switch col {
							case "id", "deployment_id":
								vals[c] = newID
							case "application":
								vals[c] = fmt.Sprintf("app-%d", i%20)
							case "environment":
								vals[c] = env
							case "version":
								vals[c] = strconv.Itoa(i)
							case "created_at", "started_at":
								vals[c] = at.Format(time.RFC3339Nano)
							case "finished_at":
								if vals[c] != nil {
									vals[c] = at.Add(30 * time.Second).Format(time.RFC3339Nano)
								}
							case "state":
								if t.name == "manent_deployments" {
									vals[c] = state
								}
							}
						}
						if _, err := stmts[t.name].ExecContext(ctx, vals...); err != nil {
							return fmt.Errorf("%s: %w", t.name, err)
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	// Statistics for the planner, and on PostgreSQL the visibility map a
	// running server's autovacuum would have built: measuring while
	// autovacuum works through the freshly loaded rows measures it.
	settle := "ANALYZE"
	if st.Postgres() {
		settle = "VACUUM ANALYZE"
	}
	if _, err := st.DB().ExecContext(ctx, settle); err != nil {
		b.Fatal(err)
	}
}

func rebind(st *store.Store, q string) string {
	if !st.Postgres() {
		return q
	}
	var sb strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			sb.WriteString("$" + strconv.Itoa(n))
			continue
		}
		sb.WriteRune(c)
	}
	return sb.String()
}

func dbSize(b *testing.B, st *store.Store) int64 {
	var size int64
	q := `SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()`
	if st.Postgres() {
		q = `SELECT pg_database_size(current_database())`
	}
	if err := st.DB().QueryRowContext(context.Background(), q).Scan(&size); err != nil {
		b.Fatal(err)
	}
	return size
}

type tableSize struct {
	name  string
	bytes int64
}

// tableSizes lists the biggest tables with their indexes (SQLite's dbstat,
// PostgreSQL's pg_total_relation_size), for the sizing of
// docs/operations.md: which tables dominate the growth.
func tableSizes(b *testing.B, st *store.Store) []tableSize {
	q := `SELECT COALESCE(m.tbl_name, s.name), SUM(s.pgsize) FROM dbstat s
		LEFT JOIN sqlite_schema m ON m.name = s.name GROUP BY 1 ORDER BY 2 DESC LIMIT 8`
	if st.Postgres() {
		q = `SELECT n.nspname || '.' || c.relname, pg_total_relation_size(c.oid) FROM pg_class c
			JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
			ORDER BY 2 DESC LIMIT 8`
	}
	rows, err := st.DB().QueryContext(context.Background(), q)
	if err != nil {
		b.Logf("table sizes: %v", err)
		return nil
	}
	defer rows.Close()
	var out []tableSize
	for rows.Next() {
		var t tableSize
		if err := rows.Scan(&t.name, &t.bytes); err != nil {
			b.Fatal(err)
		}
		out = append(out, t)
	}
	return out
}
