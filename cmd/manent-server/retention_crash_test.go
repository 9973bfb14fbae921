package main_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// The server killed (SIGKILL) in the middle of a retention.deploys pass
// leaves the database consistent — no deploy whose steps or events are gone
// while its row stays, nor the reverse — with the audit chain verifying,
// and after a restart the next pass removes the rest.
func TestSIGKILLDuringRetention(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		const n = 3000 // more than one run removes (20 batches of 100)
		ctx := context.Background()
		st, err := store.Open(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-100 * 24 * time.Hour).UTC()
		err = st.Tx(ctx, func(tx *sql.Tx) error {
			for i := 0; i < n; i++ {
				id := fmt.Sprintf("dpl_old%05d", i)
				err := st.InsertDeployment(ctx, tx, &store.Record{Deployment: manent.Deployment{ID: id, Application: "ret",
					Environment: "prod", Version: fmt.Sprint(i), State: manent.StatePending, Requester: "token:t", CreatedAt: old}, Input: []byte(`{}`)})
				if err == nil {
					err = st.PlanSteps(ctx, tx, id, []string{"config", "deploy", "cleanup"})
				}
				if err == nil {
					err = st.AppendAuditTx(ctx, tx, store.AuditEntry{Time: old, Identity: "token:t", Action: "deployment.submit", Target: "ret/prod", Outcome: "accepted", Detail: id})
				}
				if err != nil {
					return err
				}
			}
			at := "'" + old.Format("2006-01-02T15:04:05.000000000Z") + "'" // the store's time format
			_, err := tx.ExecContext(ctx, `UPDATE manent_deployments SET state = 'SUCCESS', finished_at = `+at+`, workflows_deleted_at = `+at)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		raw := rawDB(t, db)
		// 40 log lines a deploy: batches long enough to be cut.
		line := `{"step":"deploy","text":"` + strings.Repeat("x", 200) + `"}`
		if _, err := raw.ExecContext(ctx, `WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < 40)
			INSERT INTO manent_events (deployment_id, seq, type, time, data)
			SELECT d.id, 1000 + g.x, 'log', d.created_at, '`+line+`' FROM manent_deployments d, g`); err != nil {
			t.Fatal(err)
		}
		counts := func() (rows, orphans, bare int) {
			t.Helper()
			q := func(query string) int {
				var c int
				if err := raw.QueryRowContext(ctx, query).Scan(&c); err != nil {
					t.Fatal(err)
				}
				return c
			}
			return q(`SELECT COUNT(*) FROM manent_deployments`),
				q(`SELECT COUNT(*) FROM manent_steps s WHERE NOT EXISTS (SELECT 1 FROM manent_deployments d WHERE d.id = s.deployment_id)`) +
					q(`SELECT COUNT(*) FROM manent_events e WHERE NOT EXISTS (SELECT 1 FROM manent_deployments d WHERE d.id = e.deployment_id)`),
				q(`SELECT COUNT(*) FROM manent_deployments d WHERE NOT EXISTS (SELECT 1 FROM manent_steps s WHERE s.deployment_id = d.id)`)
		}
		check := func(when string) int {
			t.Helper()
			rows, orphans, bare := counts()
			if orphans != 0 || bare != 0 {
				t.Errorf("%s: %d steps or events of removed deploys, %d deploys without their steps", when, orphans, bare)
			}
			if _, problems, err := st.VerifyAudit(ctx); err != nil || len(problems) != 0 {
				t.Errorf("%s: the audit chain: %v %v", when, problems, err)
			}
			return rows
		}

		dir := t.TempDir()
		cfg := filepath.Join(dir, "manent-server.yaml")
		if err := os.WriteFile(cfg, []byte("retention: {workflows: 24h, deploys: 24h, every: 1s}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		data := filepath.Join(dir, "data")
		p := startArgs(t, []string{"--config", cfg}, data, db, "MANENT_EXECUTOR_ID=ret-worker")
		// Polled without a pause, to kill as soon as the first batch
		// committed: in the middle of the run.
		for deadline := time.Now().Add(60 * time.Second); ; {
			var r int
			if err := raw.QueryRowContext(ctx, `SELECT COUNT(*) FROM manent_deployments`).Scan(&r); err != nil {
				t.Fatal(err)
			}
			if r < n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("retention removed nothing within 60s")
			}
		}
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.done
		left := check("after SIGKILL")
		t.Logf("SIGKILL with %d of %d deploys left", left, n)
		if left == 0 {
			t.Fatalf("retention finished before the kill: nothing was interrupted")
		}

		startArgs(t, []string{"--config", cfg}, data, db, "MANENT_EXECUTOR_ID=ret-worker")
		enginetest.Eventually(t, 120*time.Second, func() bool { r, _, _ := counts(); return r == 0 }, "the next passes to remove the rest")
		check("after the restart")
	})
}

// rawDB opens the database of url with database/sql, beside the server.
func rawDB(t *testing.T, url string) *sql.DB {
	t.Helper()
	driver, dsn := "pgx", url
	if path, ok := strings.CutPrefix(url, "sqlite:"); ok {
		driver, dsn = "sqlite", "file:"+path+"?_pragma=busy_timeout(10000)"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
