package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// What retention.deploys costs a batch with thousands of waiting deploys
// (a delayed deploy per commit, each with its own version and a 4 KB
// saved input, one in ten with an `after`): it prints the time of one
// batch and, for comparison, of the reads the keep-list was made of before
// (Unfinished, then Successes per version: a query per waiting deploy).
// Figures only: no timed assertion. MANENT_RETENTION_COST_WAITING sets the
// number (3000).
func TestRetentionCostWithThousandsWaiting(t *testing.T) {
	n := 3000
	if v := envInt("MANENT_RETENTION_COST_WAITING"); v > 0 {
		n = v
	}
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		ctx := context.Background()
		base := time.Now().Add(-100 * 24 * time.Hour).UTC()
		for i := 0; i < 200; i++ {
			insertFinished(t, st, fmt.Sprintf("dpl_old%04d", i), "billing", fmt.Sprintf("env-%02d", i%20), fmt.Sprint(i), manent.StateSuccess, base.Add(time.Duration(i)*time.Minute))
		}
		pad := strings.Repeat("x", 4000)
		err := st.Tx(ctx, func(tx *sql.Tx) error {
			for i := 0; i < n; i++ {
				waits := map[string]any{"at": "2027-06-01T00:00:00Z"}
				if i%10 == 0 {
					waits["after"] = []string{fmt.Sprintf("dpl_old%04d", i%200)}
				}
				in, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("dpl_w%05d", i), "waits": waits, "notice": pad})
				err := st.InsertDeployment(ctx, tx, &store.Record{Deployment: manent.Deployment{ID: fmt.Sprintf("dpl_w%05d", i), Application: "billing",
					Environment: "prod", Version: fmt.Sprint(1000 + i), State: manent.StateDelayed, Requester: "token:t", CreatedAt: base}, Input: in})
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}

		start := time.Now()
		waiting, err := st.Unfinished(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range waiting {
			if _, err := st.Successes(ctx, r.Application, r.Version); err != nil {
				t.Fatal(err)
			}
		}
		before := time.Since(start)

		start = time.Now()
		removed, err := st.PruneDeploys(ctx, time.Now(), 100)
		if err != nil {
			t.Fatal(err)
		}
		batch := time.Since(start)
		t.Logf("%d waiting deploys: one batch of retention.deploys (its keep-list read three times: to choose, to mark, to delete) %v, removed %d; the keep-list's reads as they were (Unfinished, Successes per version), once: %v",
			n, batch.Round(time.Millisecond), removed, before.Round(time.Millisecond))
		// dpl_old0000..0199: every tenth waiting deploy comes after one
		// with i%10 == 0 → dpl_old0000, 0010, …, 0190 (20) are kept,
		// with the 20 current releases and the 20 before them.
		if _, err := st.Deployment(ctx, "dpl_old0010"); err != nil {
			t.Errorf("dpl_old0010, which a waiting deploy comes after, was removed: %v", err)
		}
	})
}

func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}

// seedLogs gives each deploy of ids lines log lines, numbered from 1000,
// in one transaction.
func seedLogs(t *testing.T, st *store.Store, ids []string, lines int) {
	ctx := context.Background()
	err := st.Tx(ctx, func(tx *sql.Tx) error {
		for _, id := range ids {
			q := fmt.Sprintf(`INSERT INTO manent_events (deployment_id, seq, type, time, data)
				WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n+1 FROM c WHERE n < %d)
				SELECT '%s', 1000+n, 'log', '2026-01-01T00:00:00.000000000Z', '{"step":"deploy","text":"line of a deploy that retention removes"}' FROM c`, lines-1, id)
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The longest transaction of a retention.deploys batch of 100 deploys of
// 2,000 log lines each: how long it holds SQLite's only writer (and a
// PostgreSQL transaction's locks) while submissions, step records and
// heartbeats wait. Figures only, no timed assertion: it prints them.
// MANENT_PRUNE_HOLD_LINES sets the lines per deploy (2000).
func TestPruneWriterHold(t *testing.T) {
	lines := 2000
	if v := envInt("MANENT_PRUNE_HOLD_LINES"); v > 0 {
		lines = v
	}
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		base := time.Now().Add(-100 * 24 * time.Hour).UTC()
		var ids []string
		for j := 0; j < 102; j++ {
			id := fmt.Sprintf("dpl_b%04d", j)
			insertFinished(t, st, id, "billing", "prod", fmt.Sprint(j), manent.StateSuccess, base.Add(time.Duration(j)*time.Minute))
			ids = append(ids, id)
		}
		seedLogs(t, st, ids, lines)
		var longest, total time.Duration
		txs := 0
		st.SetAfterTx(func(took time.Duration) {
			longest = max(longest, took)
			total += took
			txs++
		})
		start := time.Now()
		removed, err := st.PruneDeploys(context.Background(), time.Now(), 100)
		if err != nil {
			t.Fatal(err)
		}
		st.SetAfterTx(nil)
		if removed != 100 {
			t.Errorf("removed %d deploys, want 100 (the current release and the one before it kept)", removed)
		}
		t.Logf("retention.deploys removed %d deploys of %d log lines in %v, in %d transactions: the longest held the writer %v (all of them %v)",
			removed, lines, time.Since(start).Round(time.Millisecond), txs, longest.Round(time.Millisecond), total.Round(time.Millisecond))
	})
}
