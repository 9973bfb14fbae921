package web_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// BenchmarkActivityTTFB measures the time to the first byte of the
// activity page (GET /, signed in) with 10,000 deploys in the database
// (SQLite), the goal being under 50 ms. One real deploy runs through the
// engine; its deployment and step rows are copied 10,000 times with new
// ids, applications and environments; two real deploys wait (an approval,
// a running step), so the page has something to show.
//
// Run: go test ./pkg/web -run '^$' -bench ActivityTTFB -benchtime 200x
func BenchmarkActivityTTFB(b *testing.B) {
	s := startUI(b)
	g := s.gate(b, "bench-gate")
	open(b, g)
	tmpl := s.submit(b, "alice-token", gatedDeploy(b, "staging", "0.1", g))
	s.waitState(b, tmpl, manent.StateSuccess)
	seedDeploys(b, s, tmpl, 10_000)
	hold := s.gate(b, "bench-hold")
	b.Cleanup(func() { open(b, hold) })
	running := s.submit(b, "alice-token", gatedDeploy(b, "staging", "0.2", hold))
	s.waitState(b, running, manent.StatePending)
	waiting := s.submit(b, "alice-token", gatedDeploy(b, "prod", "0.2", hold))
	s.waitState(b, waiting, manent.StateAwaitingApproval)

	br := newBrowser(b, s.URL)
	br.login("bob-token")
	if p := br.get("/"); p.Status != 200 || !strings.Contains(p.Body, waiting) {
		b.Fatalf("activity: %d", p.Status)
	}
	var ds []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var t0, first time.Time
		tr := &httptrace.ClientTrace{
			WroteRequest:         func(httptrace.WroteRequestInfo) { t0 = time.Now() },
			GotFirstResponseByte: func() { first = time.Now() },
		}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), tr), http.MethodGet, s.URL+"/", nil)
		resp, err := br.hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("GET /: %d", resp.StatusCode)
		}
		ds = append(ds, first.Sub(t0))
	}
	b.StopTimer()
	slices.Sort(ds)
	p50, p99 := ds[len(ds)/2], ds[len(ds)*99/100]
	b.ReportMetric(float64(p50.Microseconds())/1000, "ttfb-p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "ttfb-p99-ms")
}

// seedDeploys copies the deployment and step rows of deploy id n times.
func seedDeploys(b *testing.B, s *uiServer, id string, n int) {
	ctx := context.Background()
	db := s.Store.DB()
	type table struct {
		name, key string
		cols      []string
		rows      [][]any
	}
	tables := []*table{{name: "manent_deployments", key: "id"}, {name: "manent_steps", key: "deployment_id"}}
	for _, t := range tables {
		rows, err := db.QueryContext(ctx, `SELECT * FROM `+t.name+` WHERE `+t.key+` = ?`, id)
		if err != nil {
			b.Fatal(err)
		}
		t.cols, _ = rows.Columns()
		for rows.Next() {
			vals := make([]any, len(t.cols))
			ptrs := make([]any, len(vals))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				b.Fatal(err)
			}
			t.rows = append(t.rows, vals)
		}
		rows.Close()
	}
	base := time.Now().Add(-time.Duration(n) * time.Minute)
	err := s.Store.Tx(ctx, func(tx *sql.Tx) error {
		for _, t := range tables {
			ph := strings.TrimSuffix(strings.Repeat("?, ", len(t.cols)), ", ")
			st, err := tx.PrepareContext(ctx, `INSERT INTO `+t.name+` (`+strings.Join(t.cols, ", ")+`) VALUES (`+ph+`)`)
			if err != nil {
				return err
			}
			for i := 0; i < n; i++ {
				at := base.Add(time.Duration(i) * time.Minute).UTC()
				for _, row := range t.rows {
					vals := slices.Clone(row)
					for c, col := range t.cols {
						switch col {
						case "id", "deployment_id":
							vals[c] = fmt.Sprintf("seed_%d", i)
						case "application":
							vals[c] = fmt.Sprintf("app-%d", i%20)
						case "environment":
							vals[c] = fmt.Sprintf("env-%d", i%5)
						case "version":
							vals[c] = fmt.Sprint(i)
						case "created_at", "started_at":
							vals[c] = at.Format(time.RFC3339Nano)
						case "finished_at":
							if vals[c] != nil {
								vals[c] = at.Add(30 * time.Second).Format(time.RFC3339Nano)
							}
						}
					}
					if _, err := st.ExecContext(ctx, vals...); err != nil {
						st.Close()
						return fmt.Errorf("%s: %w", t.name, err)
					}
				}
			}
			st.Close()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
