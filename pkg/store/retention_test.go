package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// insertFinished inserts a deploy of app/env at version that ended state at
// `at`, its DBOS workflows already deleted (what retention.deploys needs).
func insertFinished(t *testing.T, st *store.Store, id, app, env, version string, state manent.State, at time.Time) {
	t.Helper()
	ctx := context.Background()
	err := st.Tx(ctx, func(tx *sql.Tx) error {
		return st.InsertDeployment(ctx, tx, &store.Record{Deployment: manent.Deployment{ID: id, Application: app, Environment: env,
			Version: version, State: manent.StatePending, Requester: "token:t", CreatedAt: at.Add(-time.Minute)}, Input: []byte(`{}`)})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Finish(ctx, id, store.Outcome{State: state, At: at}); err != nil {
		t.Fatal(err)
	}
	if err := st.WorkflowsDeleted(ctx, id, at); err != nil {
		t.Fatal(err)
	}
}

// retention.deploys removes old final deploys but never one something still
// needs: the environment's current release and last failure (the
// inventory), the release before the current one (what `manent rollback`
// goes back to), a deploy a waiting deploy comes after (its gate checks it
// when its schedule.at comes: gone, it would end DEPENDENCY_FAILED "does not
// exist"), and the successes of a waiting deploy's version (promotion is
// judged again when it starts: gone, it would be refused).
func TestPruneDeploysKeepsWhatIsStillNeeded(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		ctx := context.Background()
		base := time.Now().Add(-100 * 24 * time.Hour).UTC()
		for i := 0; i <= 5; i++ {
			insertFinished(t, st, fmt.Sprintf("dpl_s%d", i), "billing", "staging", fmt.Sprint(i), manent.StateSuccess, base.Add(time.Duration(i)*time.Hour))
		}
		insertFinished(t, st, "dpl_fail", "billing", "staging", "6", manent.StateError, base.Add(7*time.Hour))
		// A prod deploy of version 1, DELAYED for months, after dpl_s2.
		err := st.Tx(ctx, func(tx *sql.Tx) error {
			return st.InsertDeployment(ctx, tx, &store.Record{Deployment: manent.Deployment{ID: "dpl_later", Application: "billing",
				Environment: "prod", Version: "1", State: manent.StateDelayed, Requester: "token:t", CreatedAt: base},
				Input: []byte(`{"id":"dpl_later","waits":{"at":"2027-06-01T00:00:00Z","after":["dpl_s2"]}}`)})
		})
		if err != nil {
			t.Fatal(err)
		}
		n, err := st.PruneDeploys(ctx, time.Now(), 100)
		if err != nil {
			t.Fatal(err)
		}
		why := map[string]string{
			"dpl_s1":   "a success of the waiting deploy's version (promotion)",
			"dpl_s2":   "the deploy the waiting deploy comes after",
			"dpl_s4":   "the release before the current one (rollback)",
			"dpl_s5":   "the current release",
			"dpl_fail": "the last failure",
		}
		for _, id := range []string{"dpl_s0", "dpl_s3"} {
			if _, err := st.Deployment(ctx, id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s was kept (%v): nothing needs it", id, err)
			}
		}
		for id, what := range why {
			if _, err := st.Deployment(ctx, id); err != nil {
				t.Errorf("%s, %s, was removed: %v", id, what, err)
			}
		}
		if n != 2 {
			t.Errorf("removed %d deploys, want 2", n)
		}
		if cur, _ := st.Current(ctx, "billing", "staging"); cur == nil {
			t.Fatal("no current release")
		} else if prev, err := st.ReleaseBefore(ctx, "billing", "staging", *cur); err != nil || prev == nil || prev.ID != "dpl_s4" {
			t.Errorf("rollback target after retention: %+v %v, want dpl_s4", prev, err)
		}
		if _, problems, err := st.VerifyAudit(ctx); err != nil || len(problems) != 0 {
			t.Fatalf("audit after retention: %v %v", problems, err)
		}

		// Once the waiting deploy has ended, what only it needed goes.
		if err := st.Finish(ctx, "dpl_later", store.Outcome{State: manent.StateCancelled, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if n, err := st.PruneDeploys(ctx, time.Now().Add(-time.Hour), 100); err != nil || n != 2 {
			t.Fatalf("second pass removed %d (%v), want 2 (dpl_s1, dpl_s2)", n, err)
		}
	})
}

// A deploy submitted after retention chose its batch and before the batch
// is deleted — one that comes after a deploy of the batch, or deploys a
// version whose success in the batch promotion was judged on — keeps that
// deploy: what is still needed is read again in the deleting transaction.
// A submission that locked its references first makes retention wait for
// it; one that comes after the deletion finds the deploy gone
// (LockReferencesTx) and is refused instead of ending DEPENDENCY_FAILED.
func TestPruneDeploysSeesWhatIsSubmittedMeanwhile(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		ctx := context.Background()
		base := time.Now().Add(-100 * 24 * time.Hour).UTC()
		insertFinished(t, st, "dpl_dep", "billing", "staging", "1", manent.StateSuccess, base)
		insertFinished(t, st, "dpl_promo", "billing", "staging", "2", manent.StateSuccess, base.Add(time.Hour))
		insertFinished(t, st, "dpl_old", "billing", "staging", "3", manent.StateSuccess, base.Add(2*time.Hour))
		for i := 4; i <= 5; i++ {
			insertFinished(t, st, fmt.Sprintf("dpl_s%d", i), "billing", "staging", fmt.Sprint(i), manent.StateSuccess, base.Add(time.Duration(i)*time.Hour))
		}
		submit := func(id, env, version, input string) {
			t.Helper()
			err := st.Tx(ctx, func(tx *sql.Tx) error {
				var after []string
				if id == "dpl_after" {
					after = []string{"dpl_dep"}
				}
				missing, err := st.LockReferencesTx(ctx, tx, after, "billing", version)
				if err != nil {
					return err
				}
				if len(missing) > 0 {
					return fmt.Errorf("missing %v", missing)
				}
				return st.InsertDeployment(ctx, tx, &store.Record{Deployment: manent.Deployment{ID: id, Application: "billing",
					Environment: env, Version: version, State: manent.StateDelayed, Requester: "token:t", CreatedAt: time.Now()},
					Input: []byte(input)})
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		var chosen []string
		st.SetBeforePrune(func(ids []string) {
			chosen = ids
			submit("dpl_after", "prod", "9", `{"id":"dpl_after","waits":{"at":"2027-06-01T00:00:00Z","after":["dpl_dep"]}}`)
			submit("dpl_promote", "prod", "2", `{"id":"dpl_promote","waits":{"at":"2027-06-01T00:00:00Z"}}`)
		})
		n, err := st.PruneDeploys(ctx, time.Now(), 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(chosen) != 3 {
			t.Fatalf("the batch was %v, want dpl_dep, dpl_promo and dpl_old", chosen)
		}
		for id, what := range map[string]string{"dpl_dep": "the deploy dpl_after comes after", "dpl_promo": "the success dpl_promote's promotion needs"} {
			if _, err := st.Deployment(ctx, id); err != nil {
				t.Errorf("%s, %s (submitted while retention ran), was removed: %v", id, what, err)
			}
		}
		if _, err := st.Deployment(ctx, "dpl_old"); !errors.Is(err, store.ErrNotFound) || n != 1 {
			t.Errorf("removed %d, dpl_old: %v; want 1, dpl_old removed", n, err)
		}

		// Submitted after the deletion: the submission sees it is gone.
		err = st.Tx(ctx, func(tx *sql.Tx) error {
			missing, err := st.LockReferencesTx(ctx, tx, []string{"dpl_dep", "dpl_old"}, "billing", "7")
			if err == nil && (len(missing) != 1 || missing[0] != "dpl_old") {
				t.Errorf("missing references %v, want [dpl_old]", missing)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, problems, err := st.VerifyAudit(ctx); err != nil || len(problems) != 0 {
			t.Fatalf("audit after retention: %v %v", problems, err)
		}
	})
}

// Two PostgreSQL workers running retention.deploys at the same instant over
// the same old deploys: neither fails, each deploy is removed once (the
// counts add up to what there was), and the audit chain still verifies.
func TestPruneDeploysOnTwoWorkersAtOnce(t *testing.T) {
	db := enginetest.Postgres(t)
	a, b := openStore(t, db), openStore(t, db)
	ctx := context.Background()
	base := time.Now().Add(-100 * 24 * time.Hour).UTC()
	const n = 250
	for i := 0; i < n; i++ {
		insertFinished(t, a, fmt.Sprintf("dpl_p%03d", i), "billing", fmt.Sprintf("env-%d", i%5), fmt.Sprint(i), manent.StateSuccess, base.Add(time.Duration(i)*time.Minute))
	}
	kept := 10 // per environment: the current release and the one before it
	start := make(chan struct{})
	type result struct {
		n   int
		err error
	}
	results := make(chan result, 2)
	for _, st := range []*store.Store{a, b} {
		go func() {
			<-start
			total := 0
			for {
				k, err := st.PruneDeploys(ctx, time.Now(), 100)
				total += k
				if err != nil || k == 0 {
					results <- result{total, err}
					return
				}
			}
		}()
	}
	close(start)
	total := 0
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Errorf("a worker's retention failed: %v", r.err)
		}
		total += r.n
	}
	if total != n-kept {
		t.Errorf("the two workers removed %d deploys together, want %d", total, n-kept)
	}
	left, _, err := a.List(ctx, store.Filter{Application: "billing", Limit: 1000})
	if err != nil || len(left) != kept {
		t.Errorf("%d deploys left (%v), want %d", len(left), err, kept)
	}
	if _, problems, err := a.VerifyAudit(ctx); err != nil || len(problems) != 0 {
		t.Fatalf("audit after retention on two workers: %v %v", problems, err)
	}
}

// retention removes a deploy's log lines in transactions of a bounded
// number of rows (store.SetPruneChunk), not all of a batch's in one: 100
// deploys of 2,000 lines held SQLite's only writer for 1.2 s, during which
// submissions, step records and heartbeats waited (TestPruneWriterHold).
// While its lines go, a deploy reads as one whose log retention removed
// (LogsRemovedFrom), never as whole; a crash then leaves it so, and the next
// run goes on.
func TestPruneBoundsEachTransaction(t *testing.T) {
	defer store.SetPruneChunk(50)()
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		ctx := context.Background()
		base := time.Now().Add(-100 * 24 * time.Hour).UTC()
		var ids []string
		for j := 0; j < 6; j++ {
			id := fmt.Sprintf("dpl_c%d", j)
			insertFinished(t, st, id, "billing", "prod", fmt.Sprint(j), manent.StateSuccess, base.Add(time.Duration(j)*time.Minute))
			ids = append(ids, id)
		}
		seedLogs(t, st, ids, 200)
		count := func(q string, args ...any) int {
			if st.Postgres() {
				q = strings.ReplaceAll(q, "?", "$1")
			}
			var n int
			if err := st.DB().QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		events := count(`SELECT COUNT(*) FROM manent_events`)
		most := 0
		st.SetAfterTx(func(time.Duration) {
			now := count(`SELECT COUNT(*) FROM manent_events`)
			most = max(most, events-now)
			events = now
			for _, id := range ids {
				lines := count(`SELECT COUNT(*) FROM manent_events WHERE type = 'log' AND deployment_id = ?`, id)
				if lines == 0 || lines == 200 {
					continue
				}
				if at, err := st.LogsRemovedFrom(ctx, id); err != nil || at == nil {
					t.Errorf("%s has %d of its 200 log lines and reads as whole (logs removed from %v, %v)", id, lines, at, err)
				}
			}
		})
		// retention.logs of the two newest, then retention.deploys of
		// the four oldest (the current release and the one before it
		// are kept).
		if n, err := st.PruneLogs(ctx, base.Add(time.Hour), 100); err != nil || n != 6 {
			t.Fatalf("PruneLogs: %d, %v", n, err)
		}
		seedLogs(t, st, ids[:4], 200)
		if n, err := st.PruneDeploys(ctx, time.Now(), 100); err != nil || n != 4 {
			t.Fatalf("PruneDeploys: %d, %v", n, err)
		}
		st.SetAfterTx(nil)
		if most > 60 {
			t.Errorf("one transaction of retention removed %d events, want at most the chunk of 50 log lines and a deploy's few others", most)
		}
		for _, id := range ids[4:] {
			if at, err := st.LogsRemovedFrom(ctx, id); err != nil || at == nil {
				t.Errorf("%s: its log lines were removed and it reads as whole (%v, %v)", id, at, err)
			}
		}
	})
}

// QA: a release rolled back in staging counted again for promotion once
// retention removed the rollback's record: a prod deploy of that version
// waiting for its approval kept the version's staging successes (promotion
// is judged again when it starts), retention removed the rollback, and the
// config step found the release good. A rollback that ended SUCCESS is
// kept, with the deploy it went back from, until the version succeeds
// there again.
func TestPruneDeploysKeepsTheRollbackOfARelease(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		ctx := context.Background()
		base := time.Now().Add(-100 * 24 * time.Hour).UTC()
		insertFinished(t, st, "dpl_a", "billing", "staging", "2", manent.StateSuccess, base)
		insertFinished(t, st, "dpl_b", "billing", "staging", "2", manent.StateSuccess, base.Add(time.Hour))
		err := st.Tx(ctx, func(tx *sql.Tx) error {
			return st.InsertDeployment(ctx, tx, &store.Record{Deployment: manent.Deployment{ID: "dpl_rb", Application: "billing", Environment: "staging",
				Version: "1", State: manent.StatePending, Requester: "token:ops", CreatedAt: base.Add(2 * time.Hour), RollbackOf: "dpl_b"}, Input: []byte(`{}`)})
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Finish(ctx, "dpl_rb", store.Outcome{State: manent.StateSuccess, At: base.Add(2 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := st.WorkflowsDeleted(ctx, "dpl_rb", base.Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		insertFinished(t, st, "dpl_c", "billing", "staging", "3", manent.StateSuccess, base.Add(3*time.Hour))
		insertFinished(t, st, "dpl_d", "billing", "staging", "4", manent.StateSuccess, base.Add(4*time.Hour))
		err = st.Tx(ctx, func(tx *sql.Tx) error {
			return st.InsertDeployment(ctx, tx, &store.Record{Deployment: manent.Deployment{ID: "dpl_prod", Application: "billing",
				Environment: "prod", Version: "2", State: manent.StateAwaitingApproval, Requester: "token:t", CreatedAt: base}, Input: []byte(`{}`)})
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.PruneDeploys(ctx, time.Now(), 100); err != nil {
			t.Fatal(err)
		}
		rolledBack := func() bool {
			succ, err := st.Successes(ctx, "billing", "2")
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range succ {
				if s.Environment != "staging" {
					continue
				}
				rb, err := st.RolledBackSince(ctx, "billing", "staging", "2", *s.FinishedAt)
				if err != nil {
					t.Fatal(err)
				}
				if rb == nil {
					t.Logf("%s, a success of 2 in staging, reads as not rolled back", s.ID)
					return false
				}
			}
			return true
		}
		if !rolledBack() {
			t.Fatal("after retention, release 2 counts as a success in staging again: the rollback's record was removed")
		}
		for _, id := range []string{"dpl_rb", "dpl_b"} {
			if _, err := st.Deployment(ctx, id); err != nil {
				t.Errorf("%s was removed: %v", id, err)
			}
		}

		// Once version 2 succeeds there again, the rollback takes nothing
		// back: it may go.
		insertFinished(t, st, "dpl_e", "billing", "staging", "2", manent.StateSuccess, base.Add(5*time.Hour))
		if err := st.Finish(ctx, "dpl_prod", store.Outcome{State: manent.StateCancelled, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.PruneDeploys(ctx, time.Now(), 100); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Deployment(ctx, "dpl_rb"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("dpl_rb was kept (%v) once 2 succeeded in staging again", err)
		}
	})
}
