package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

func submitWithKey(t *testing.T, url, token, key, body string) (int, api.SubmitResult, http.Header) {
	t.Helper()
	return postWithKey[api.SubmitResult](t, url+"/api/v1/deployments", token, key, body)
}

// postWithKey POSTs body with token and, unless key is empty, an
// Idempotency-Key, and decodes the answer as T.
func postWithKey[T any](t *testing.T, url, token, key, body string) (int, T, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if strings.HasPrefix(body, "{") {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res T
	_ = json.NewDecoder(resp.Body).Decode(&res)
	return resp.StatusCode, res, resp.Header
}

// Idempotency-Key (SPEC §11.1): a retry with the same key and body gets the
// first answer (same status, same id, Idempotent-Replayed: true) and creates
// nothing; another body with the key is a 422; another identity's key is
// its own; racing retries create one deploy.
func TestIdempotentSubmission(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		tokens := []auth.TokenConfig{{Name: "other", SHA256: auth.HashToken("other-token")}}
		rules := []auth.RBACRule{{Subjects: []string{"token:other"}, Permissions: []string{"deployment.submit", "deployment.read"}}}
		srv := newTestServer(t, db, tokens, rules)
		art := artifactFile(t)
		body := string(simple(art, "staging", "1", ""))

		status, first, h := submitWithKey(t, srv.URL, "admin-token", "retry-1", body)
		if status != http.StatusAccepted || first.ID == "" || h.Get("Idempotent-Replayed") != "" {
			t.Fatalf("first: %d %+v %v", status, first, h)
		}
		status, again, h := submitWithKey(t, srv.URL, "admin-token", "retry-1", body)
		if status != http.StatusAccepted || again.ID != first.ID || h.Get("Idempotent-Replayed") != "true" ||
			h.Get("Location") != "/api/v1/deployments/"+first.ID {
			t.Fatalf("retry: %d %+v %v, want the first answer replayed", status, again, h)
		}
		if status, _, _ := submitWithKey(t, srv.URL, "admin-token", "retry-1", string(simple(art, "staging", "2", ""))); status != http.StatusUnprocessableEntity {
			t.Fatalf("same key, another body: %d, want 422", status)
		}
		status, theirs, _ := submitWithKey(t, srv.URL, "other-token", "retry-1", body)
		if status != http.StatusAccepted || theirs.ID == first.ID {
			t.Fatalf("another identity's key: %d %+v, want a deploy of its own", status, theirs)
		}

		// Racing retries of one request: one deploy.
		race := string(simple(art, "staging", "3", ""))
		var wg sync.WaitGroup
		ids := make([]string, 8)
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if status, res, _ := submitWithKey(t, srv.URL, "admin-token", "race", race); status == http.StatusAccepted {
					ids[i] = res.ID
				}
			}()
		}
		wg.Wait()
		for _, id := range ids {
			if id == "" || id != ids[0] {
				t.Fatalf("racing retries answered %v: want one id, 8 times", ids)
			}
		}
		list, err := api.NewClient(srv.URL, "admin-token", nil).List(context.Background(), api.ListOptions{Application: "billing", Environment: "staging", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, d := range list.Items {
			n[d.Version]++
		}
		if n["1"] != 2 || n["3"] != 1 || n["2"] != 0 {
			t.Fatalf("deploys by version %v: want 1 twice (two identities), 3 once, 2 never", n)
		}
		if status, _, _ := submitWithKey(t, srv.URL, "admin-token", strings.Repeat("k", 256), body); status != http.StatusUnprocessableEntity {
			t.Fatalf("a 256-character key: %d, want 422", status)
		}
	})
}

// A locked database is a 503 with Retry-After, never a 500 (SPEC §11.1), and
// /readyz fails while the database cannot be written.
func TestLockedDatabaseIs503(t *testing.T) {
	t.Parallel()
	dbURL := enginetest.SQLite(t)
	srv := newTestServer(t, dbURL+"?busy_timeout=200ms", nil, nil)
	path := strings.TrimPrefix(dbURL, "sqlite:")
	// The test's own connection waits its turn for the write lock (the
	// server's background writes hold it now and then), then keeps it.
	lock, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	status, _, _ := do(t, "GET", srv.URL+"/readyz", "", "")
	if status != http.StatusOK {
		t.Fatalf("readyz before the lock: %d", status)
	}
	tx, err := lock.Begin() // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`INSERT INTO manent_probe (id, at) VALUES (2, 'x') ON CONFLICT (id) DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	status, body, h := do(t, "POST", srv.URL+"/api/v1/deployments", "admin-token", string(simple(artifactFile(t), "staging", "1", "")))
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !strings.Contains(string(body), "busy") {
		t.Fatalf("submit while locked: %d %v %s, want 503 with Retry-After", status, h, body)
	}
	status, body, _ = do(t, "GET", srv.URL+"/readyz", "", "")
	if status != http.StatusServiceUnavailable {
		t.Fatalf("readyz while locked: %d %s, want 503", status, body)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 10*time.Second, func() bool {
		status, _, _ := do(t, "GET", srv.URL+"/readyz", "", "")
		return status == http.StatusOK
	}, "readyz to recover once the lock is gone")
	if _, err := api.NewClient(srv.URL, "admin-token", nil).Submit(context.Background(), simple(artifactFile(t), "staging", "2", ""), false); err != nil {
		t.Fatalf("submit after the lock: %v", err)
	}
}

func rollbackWithKey(t *testing.T, url, app, env, key, body string) (int, api.RollbackResult, http.Header) {
	t.Helper()
	return postWithKey[api.RollbackResult](t, url+"/api/v1/environments/"+app+"/"+env+"/rollback", "admin-token", key, body)
}

// A rollback honours Idempotency-Key like a submission: a repeat gets the
// first answer (the same deploy, Idempotent-Replayed: true) although the
// current release has changed meanwhile; the key is bound to the route and
// the body, so the same key for another environment, another --to or a
// submission is a 422; racing repeats create one deploy.
func TestIdempotentRollback(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newTestServer(t, db, nil, nil)
		admin := api.NewClient(srv.URL, "admin-token", nil)
		ctx := context.Background()
		art := artifactFile(t)
		for _, env := range []string{"staging", "prod"} {
			for _, v := range []string{"1", "2", "3"} {
				res, err := admin.Submit(ctx, simple(art, env, v, ""), false)
				if err != nil {
					t.Fatal(err)
				}
				waitFor(t, admin, res.ID, manent.StateSuccess)
			}
		}
		status, first, h := rollbackWithKey(t, srv.URL, "billing", "staging", "rb-1", "")
		if status != http.StatusAccepted || first.ID == "" || first.Version != "2" || h.Get("Idempotent-Replayed") != "" {
			t.Fatalf("first rollback: %d %+v %v", status, first, h)
		}
		waitFor(t, admin, first.ID, manent.StateSuccess) // the current release is now 2
		status, again, h := rollbackWithKey(t, srv.URL, "billing", "staging", "rb-1", "")
		if status != http.StatusAccepted || again != first || h.Get("Idempotent-Replayed") != "true" ||
			h.Get("Location") != "/api/v1/deployments/"+first.ID {
			t.Fatalf("repeat: %d %+v %v, want the first answer %+v replayed", status, again, h, first)
		}
		for _, tt := range []struct{ env, body string }{{"prod", ""}, {"staging", `{"to":"1"}`}} {
			if status, _, _ := rollbackWithKey(t, srv.URL, "billing", tt.env, "rb-1", tt.body); status != http.StatusUnprocessableEntity {
				t.Errorf("key rb-1 for %s %s: %d, want 422", tt.env, tt.body, status)
			}
		}
		if status, _, _ := submitWithKey(t, srv.URL, "admin-token", "rb-1", string(simple(art, "staging", "4", ""))); status != http.StatusUnprocessableEntity {
			t.Errorf("key rb-1 for a submission: %d, want 422", status)
		}

		var wg sync.WaitGroup
		ids := make([]string, 6)
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if status, res, _ := rollbackWithKey(t, srv.URL, "billing", "prod", "race", ""); status == http.StatusAccepted {
					ids[i] = res.ID
				}
			}()
		}
		wg.Wait()
		for _, id := range ids {
			if id == "" || id != ids[0] {
				t.Fatalf("racing rollbacks answered %v: want one id, 6 times", ids)
			}
		}
		list, err := admin.List(ctx, api.ListOptions{Application: "billing", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		rollbacks := 0
		for _, d := range list.Items {
			if d.RollbackOf != "" {
				rollbacks++
			}
		}
		if rollbacks != 2 {
			t.Fatalf("%d rollback deploys, want 2 (one per key)", rollbacks)
		}
	})
}

// Racing creations of a recurring schedule with one Idempotency-Key create
// one schedule, and every answer names it: the key is recorded in the
// schedule's own transaction, as a deploy's is. It was recorded after the
// schedule was: racing retries each created one (each tick then ran one
// deploy per copy), and a creation whose client went away between the two
// left a schedule that a retry with the key created again.
func TestIdempotentScheduleRace(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newTestServer(t, db, nil, nil)
		body := string(simple(artifactFile(t), "nightly", "1", "schedule: {cron: \"0 3 * * *\"}\n"))
		const n = 6
		ids := make(chan string, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range n {
			wg.Go(func() {
				<-start
				status, res, _ := submitWithKey(t, srv.URL, "admin-token", "nightly-1", body)
				if status != http.StatusCreated {
					t.Errorf("status %d, want 201", status)
				}
				ids <- res.Schedule
			})
		}
		close(start)
		wg.Wait()
		close(ids)
		seen := map[string]bool{}
		for id := range ids {
			seen[id] = true
		}
		n2, err := srv.Store.ActiveSchedules(context.Background(), "billing", "nightly")
		if err != nil {
			t.Fatal(err)
		}
		if n2 != 1 || len(seen) != 1 {
			t.Fatalf("%d schedules, answers naming %v: want one schedule named by every answer", n2, seen)
		}
	})
}
