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
		t.Logf("%d waiting deploys: one batch of retention.deploys (its keep-list read twice) %v, removed %d; the keep-list's reads as they were (Unfinished, Successes per version), once: %v",
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
