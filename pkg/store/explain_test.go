package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/store"
)

// seedHistory writes n finished deploys (with steps and events) straight
// into the tables, spread over 50 applications and 5 environments (one of
// them rare), a few failed, a few still running; then refreshes the
// planner's statistics.
func seedHistory(t *testing.T, st *store.Store, n int) {
	t.Helper()
	ctx := context.Background()
	base := time.Now().Add(-time.Duration(n) * time.Minute).UTC()
	err := st.Tx(ctx, func(tx *sql.Tx) error {
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("dpl_%d", i)
			env := fmt.Sprintf("env-%d", i%4)
			if i%500 == 0 {
				env = "env-rare"
			}
			state, finished := "SUCCESS", any(base.Add(time.Duration(i)*time.Minute+30*time.Second).Format(time.RFC3339Nano))
			switch {
			case i%50 == 0:
				state = "ERROR"
			case i > n-5:
				state, finished = "PENDING", nil
			}
			created := base.Add(time.Duration(i) * time.Minute).Format(time.RFC3339Nano)
			if _, err := tx.ExecContext(ctx, st.Q(`INSERT INTO manent_deployments (id, application, environment, version, state, requester,
				created_at, started_at, finished_at, input) VALUES (?, ?, ?, ?, ?, 'token:seed', ?, ?, ?, '{}')`),
				id, fmt.Sprintf("app-%d", i%50), env, fmt.Sprint(i), state, created, created, finished); err != nil {
				return err
			}
			for s, name := range []string{"config", "artifacts", "deploy"} {
				if _, err := tx.ExecContext(ctx, st.Q(`INSERT INTO manent_steps (deployment_id, position, name, state) VALUES (?, ?, ?, 'SUCCESS')`), id, s, name); err != nil {
					return err
				}
			}
			for seq := 1; seq <= 4; seq++ {
				if _, err := tx.ExecContext(ctx, st.Q(`INSERT INTO manent_events (deployment_id, seq, type, time, data) VALUES (?, ?, 'log', ?, '{}')`), id, seq, created); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
}

// No hot query walks a big table: each one the API, the SSE hub, the
// sweeper, promotion, metrics and retention issue SEARCHes an index (or,
// where marked, walks one that LIMIT stops or that covers it) at a history
// of thousands of deploys, on SQLite and on PostgreSQL.
func TestHotQueriesUseIndexes(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		seedHistory(t, st, 5000)
		for _, q := range store.HotQueries() {
			plan, err := st.Explain(context.Background(), q.SQL, q.Args)
			if err != nil {
				t.Fatalf("%s: %v", q.Name, err)
			}
			if bad := fullScan(plan, st.Postgres(), q.Walk); bad != "" {
				t.Errorf("%s scans a table (%s):\n%s\nquery: %s", q.Name, bad, plan, q.SQL)
			}
			if q.Index != "" && !strings.Contains(plan, q.Index) {
				t.Errorf("%s does not use %s:\n%s\nquery: %s", q.Name, q.Index, plan, q.SQL)
			}
		}
	})
}

// fullScan returns the plan line that reads a whole table, "" if none.
func fullScan(plan string, postgres, walk bool) string {
	for _, line := range strings.Split(plan, "\n") {
		l := strings.TrimSpace(line)
		if postgres {
			if strings.Contains(l, "Seq Scan on manent_") {
				return l
			}
			continue
		}
		if !strings.HasPrefix(l, "SCAN manent_") {
			continue
		}
		if !strings.Contains(l, "USING") || !walk {
			return l
		}
	}
	return ""
}
