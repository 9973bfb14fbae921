package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/pkg/store"
)

// seeded is one deploy of the DORA golden history: it finished `ago`
// before now, with a source block committed `lead` before it finished
// (none when 0). A failure with `ran` recorded that step, and only it, as
// failed (a CANCELLED deploy: as completed); with `rolledBack` its
// automatic rollback then took that long.
type seeded struct {
	app, env   string
	state      manent.State
	ago        time.Duration
	lead       time.Duration
	ran        string
	rolledBack time.Duration
}

const day = 24 * time.Hour

// doraHistory pins each figure: a deploy before the window, failures
// restored by a later success, one failure not restored, deploys that did
// not run (CANCELLED, REJECTED) or never reached the environment (refused
// at config), a failure its own rollback restored, a success without a
// source block, an environment with no failure and one with nothing in the
// window; and deploys cancelled after their activation (they changed what
// runs: a change failure, restored by the next success or by their own
// rollback) or before it (they changed nothing).
var doraHistory = []seeded{
	{"billing", "prod", manent.StateSuccess, 40 * day, day, "", 0},                                  // before 30d
	{"billing", "prod", manent.StateSuccess, 20 * day, time.Hour, "", 0},                            // lead 3600
	{"billing", "prod", manent.StateError, 10 * day, 0, "", 0},                                      // restored after 1800
	{"billing", "prod", manent.StateError, 10*day - 10*time.Minute, 0, "", 0},                       // restored after 1200
	{"billing", "prod", manent.StateSuccess, 10*day - 30*time.Minute, 2 * time.Hour, "", 0},         // lead 7200
	{"billing", "prod", manent.StateCancelled, 5 * day, 0, "activation", 0},                         // live, restored by the success of 1 day ago: 345600
	{"billing", "prod", manent.StateCancelled, 4 * day, 0, "deploy", 0},                             // cancelled before activation: changed nothing
	{"billing", "prod", manent.StateError, 3 * day, 0, "config", 0},                                 // refused at config: never reached prod
	{"billing", "prod", manent.StateError, 3*day - time.Hour, 0, "deploy", 5 * time.Minute},         // restored by its rollback after 300
	{"billing", "prod", manent.StateCancelled, 2*day + time.Hour, 0, "activation", 2 * time.Minute}, // restored by its rollback after 120
	{"billing", "prod", manent.StateCancelled, 2 * day, 0, "", 0},                                   // did not run
	{"billing", "prod", manent.StateSuccess, day, 0, "", 0},                                         // no source: no lead sample
	{"billing", "prod", manent.StateMaxRecoveryAttemptsExceeded, 12 * time.Hour, 0, "", 0},          // failed, not restored
	{"billing", "staging", manent.StateSuccess, 5 * day, time.Minute, "", 0},                        // lead 60
	{"billing", "staging", manent.StateRejected, 4 * day, 0, "", 0},
	{"web", "prod", manent.StateSuccess, 40 * day, 0, "", 0},
}

func seedDORA(t *testing.T, st *store.Store, now time.Time) []string {
	return seedHistory(t, st, now, doraHistory, nil)
}

// seedHistory records history's deploys, oldest first; the i-th has
// version versions[i] when given, else one of its own.
func seedHistory(t *testing.T, st *store.Store, now time.Time, history []seeded, versions []string) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for i, s := range history {
		fin := now.Add(-s.ago)
		version := "v" + string(rune('a'+i))
		if versions != nil {
			version = versions[i]
		}
		rec := &store.Record{Deployment: manent.Deployment{ID: manent.NewDeploymentID(), Application: s.app, Environment: s.env,
			Version: version, State: manent.StateEnqueued, Requester: "token:seed", CreatedAt: fin.Add(-time.Minute)},
			Input: json.RawMessage(`{}`)}
		if s.lead > 0 {
			at := fin.Add(-s.lead)
			rec.CommittedAt = &at
		}
		err := st.Tx(ctx, func(tx *sql.Tx) error { return st.InsertDeployment(ctx, tx, rec) })
		if err != nil {
			t.Fatal(err)
		}
		out := store.Outcome{State: s.state, At: fin}
		step := func(name string, at time.Time, state manent.StepState) {
			if _, err := st.StepStarted(ctx, rec.ID, name, at); err != nil {
				t.Fatal(err)
			}
			if _, err := st.StepFinished(ctx, rec.ID, name, store.StepEnd{State: state, Counted: true}); err != nil {
				t.Fatal(err)
			}
		}
		if s.ran != "" {
			state := manent.StepError
			if s.state == manent.StateCancelled {
				state = manent.StepSuccess
				// An activation neither compensated nor followed by
				// anything stays live, as the engine records it.
				out.Live = s.rolledBack == 0
			}
			step(s.ran, fin.Add(-time.Hour), state)
		}
		if s.rolledBack > 0 {
			step("rollback:"+s.ran, fin.Add(-s.rolledBack), manent.StepSuccess)
			out.Rollback = manent.RollbackCompleted
		}
		if err := st.Finish(ctx, rec.ID, out); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.ID)
	}
	return ids
}

// TestDORAGolden pins the four figures of GET /api/v1/metrics/dora over a
// seeded history, on SQLite and PostgreSQL.
func TestDORAGolden(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		tokens := []auth.TokenConfig{{Name: "stg", SHA256: auth.HashToken("stg-token")}}
		rules := []auth.RBACRule{{Subjects: []string{"token:stg"}, Permissions: []string{"deployment.read"},
			Applications: []string{"billing"}, Environments: []string{"staging"}}}
		ts := newTestServer(t, db, tokens, rules)
		seedDORA(t, ts.Store, time.Now())
		cases := []struct {
			name, query, token, want string
		}{
			{"prod 30d", "?application=billing&environment=prod", "admin-token", `{"window":"30d","application":"billing","environment":"prod",
				"deployment_frequency":{"deploys":9,"per_day":0.3},
				"lead_time_seconds":{"median":5400,"p90":7200,"samples":2},
				"change_failure_rate":{"failed":6,"total":9,"rate":0.667},
				"time_to_restore_seconds":{"median":1200,"samples":5,"unrestored":1}}`},
			{"prod 7d: empty samples are null", "?application=billing&environment=prod&window=7d", "admin-token", `{"window":"7d","application":"billing","environment":"prod",
				"deployment_frequency":{"deploys":5,"per_day":0.714},
				"lead_time_seconds":{"median":null,"p90":null,"samples":0},
				"change_failure_rate":{"failed":4,"total":5,"rate":0.8},
				"time_to_restore_seconds":{"median":300,"samples":3,"unrestored":1}}`},
			{"prod 36h", "?application=billing&environment=prod&window=36h", "admin-token", `{"window":"36h","application":"billing","environment":"prod",
				"deployment_frequency":{"deploys":2,"per_day":1.333},
				"lead_time_seconds":{"median":null,"p90":null,"samples":0},
				"change_failure_rate":{"failed":1,"total":2,"rate":0.5},
				"time_to_restore_seconds":{"median":null,"samples":0,"unrestored":1}}`},
			{"no failure: rate 0", "?application=billing&environment=staging", "admin-token", `{"window":"30d","application":"billing","environment":"staging",
				"deployment_frequency":{"deploys":1,"per_day":0.033},
				"lead_time_seconds":{"median":60,"p90":60,"samples":1},
				"change_failure_rate":{"failed":0,"total":1,"rate":0},
				"time_to_restore_seconds":{"median":null,"samples":0,"unrestored":0}}`},
			{"nothing in the window", "?application=web&environment=prod", "admin-token", `{"window":"30d","application":"web","environment":"prod",
				"deployment_frequency":{"deploys":0,"per_day":0},
				"lead_time_seconds":{"median":null,"p90":null,"samples":0},
				"change_failure_rate":{"failed":0,"total":0,"rate":null},
				"time_to_restore_seconds":{"median":null,"samples":0,"unrestored":0}}`},
			{"everything", "", "admin-token", `{"window":"30d","application":"","environment":"",
				"deployment_frequency":{"deploys":10,"per_day":0.333},
				"lead_time_seconds":{"median":3600,"p90":7200,"samples":3},
				"change_failure_rate":{"failed":6,"total":10,"rate":0.6},
				"time_to_restore_seconds":{"median":1200,"samples":5,"unrestored":1}}`},
			{"only what the caller may read", "?application=billing", "stg-token", `{"window":"30d","application":"billing","environment":"",
				"deployment_frequency":{"deploys":1,"per_day":0.033},
				"lead_time_seconds":{"median":60,"p90":60,"samples":1},
				"change_failure_rate":{"failed":0,"total":1,"rate":0},
				"time_to_restore_seconds":{"median":null,"samples":0,"unrestored":0}}`},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				code, body, h := do(t, http.MethodGet, ts.URL+"/api/v1/metrics/dora"+c.query, c.token, "")
				if code != http.StatusOK {
					t.Fatalf("status %d: %s", code, body)
				}
				if ct := h.Get("Content-Type"); ct != "application/json" {
					t.Errorf("content type %q", ct)
				}
				var got, want any
				if err := json.Unmarshal(body, &got); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal([]byte(c.want), &want); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("got  %s\nwant %s", body, c.want)
				}
			})
		}
		// Errors are problem+json: a bad window, reading where one may not.
		for _, c := range []struct {
			query, token string
			status       int
		}{
			{"?window=30", "admin-token", http.StatusUnprocessableEntity},
			{"?window=0d", "admin-token", http.StatusUnprocessableEntity},
			{"?window=99999w", "admin-token", http.StatusUnprocessableEntity},
			{"?window=-1d", "admin-token", http.StatusUnprocessableEntity},
			{"?window=1.5d", "admin-token", http.StatusUnprocessableEntity},
			{"?window=10000d", "admin-token", http.StatusUnprocessableEntity},
			// A filter no descriptor may match is no environment without deploys.
			{"?application=Billing", "admin-token", http.StatusUnprocessableEntity},
			{"?application=billing&environment=prod%20eu", "admin-token", http.StatusUnprocessableEntity},
			// A line break is no text: refused before any route.
			{"?application=billing&environment=prod%0A", "admin-token", http.StatusBadRequest},
			{"?application=billing&environment=prod", "stg-token", http.StatusForbidden},
			{"", "", http.StatusUnauthorized},
		} {
			code, body, h := do(t, http.MethodGet, ts.URL+"/api/v1/metrics/dora"+c.query, c.token, "")
			if code != c.status || h.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s as %q: %d %s %s, want %d problem+json", c.query, c.token, code, h.Get("Content-Type"), body, c.status)
			}
		}
	})
}

// A commit time after the deploy's end gives no lead-time sample (it would
// be negative and pull the median below what any deploy took).
func TestDORALeadTimeIgnoresCommitsAfterTheDeploy(t *testing.T) {
	now := time.Now()
	before, after := now.Add(-time.Hour), now.Add(time.Hour)
	got := server.DORA([]store.Finished{
		{ID: "a", Application: "billing", Environment: "prod", State: manent.StateSuccess, FinishedAt: now, CommittedAt: &before},
		{ID: "b", Application: "billing", Environment: "prod", State: manent.StateSuccess, FinishedAt: now, CommittedAt: &after},
	}, 30*day)
	if got.LeadTimeSeconds.Samples != 1 || got.LeadTimeSeconds.Median == nil || *got.LeadTimeSeconds.Median != 3600 {
		t.Fatalf("lead time %+v: want one sample of 3600 s", got.LeadTimeSeconds)
	}
}

// Only a deploy that reached the environment is a deploy and can be a
// change failure (DORA counts changes to production that degraded it): one
// that failed fetching its artifact changed nothing there. A failure whose
// automatic rollback completed was restored by that rollback, not by the
// next release days later; a failure nothing has restored yet is counted
// as unrestored rather than left out in silence.
func TestDORACountsWhatReachedTheEnvironment(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), govTokens, govRules)
	ci := api.NewClient(srv.URL, "ci-token", nil)
	ctx := context.Background()
	art := artifactFile(t)
	gone := "file://" + filepath.Join(t.TempDir(), "missing.txt")
	boom := func(after, rollback string) string {
		return "rollback: " + rollback + "\nsteps:\n  - {name: boom, after: " + after + ", plugin: script, with: {command: [sh, -c, 'exit 1']}}\n"
	}
	run := func(art, version, extra string, want manent.State) *manent.Deployment {
		t.Helper()
		res, err := ci.Submit(ctx, simple(art, "staging", version, extra), false)
		if err != nil {
			t.Fatal(err)
		}
		return waitFor(t, ci, res.ID, want)
	}
	dora := func() api.DORA {
		t.Helper()
		d, err := ci.DORA(ctx, api.DORAOptions{Application: "billing", Environment: "staging"})
		if err != nil {
			t.Fatal(err)
		}
		return *d
	}
	// Release 1 checks, after its activation, that the flag is absent: its
	// rollback fails once the flag is there, after reaching staging.
	flag := filepath.Join(t.TempDir(), "flag")
	check := "rollback: {enabled: false}\nsteps:\n  - {name: check, after: activation, plugin: script, with: {command: [sh, -c, 'test ! -e " + flag + "']}}\n"
	run(art, "1", check, manent.StateSuccess)
	if d := run(gone, "2", "", manent.StateError); !strings.Contains(d.Error, `step "artifacts" failed`) {
		t.Fatalf("deploy of a missing artifact: error %q, want it failed at artifacts", d.Error)
	}
	if d := run(art, "3", boom("deploy", "{enabled: true, on: [boom]}"), manent.StateError); d.Rollback != manent.RollbackCompleted {
		t.Fatalf("deploy 3: rollback %q, want completed", d.Rollback)
	}
	run(art, "4", boom("activation", "{enabled: false}"), manent.StateError)
	got := dora()
	if got.DeploymentFrequency.Deploys != 3 || got.ChangeFailureRate.Failed != 2 || got.ChangeFailureRate.Total != 3 {
		t.Errorf("deploys %d, failed %d of %d: want 3 deploys and 2 failed of 3 (the artifact that was never fetched changed nothing)",
			got.DeploymentFrequency.Deploys, got.ChangeFailureRate.Failed, got.ChangeFailureRate.Total)
	}
	ttr := got.TimeToRestoreSeconds
	if ttr.Samples != 1 || ttr.Median == nil || *ttr.Median > 60 || ttr.Unrestored != 1 {
		t.Errorf("time to restore %+v: want one sample (3's own rollback, seconds) and one unrestored failure (4)", ttr)
	}
	// A manent rollback (to 1) that fails after its activation, rollback
	// disabled, restores nothing: it is a change failure of its own, and
	// 4 stays open.
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rb, err := ci.Rollback(ctx, "billing", "staging", api.RollbackRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if rb.Version != "1" {
		t.Fatalf("rollback to %q, want 1", rb.Version)
	}
	waitFor(t, ci, rb.ID, manent.StateError)
	got = dora()
	if ttr := got.TimeToRestoreSeconds; ttr.Samples != 1 || ttr.Unrestored != 2 || got.DeploymentFrequency.Deploys != 4 || got.ChangeFailureRate.Failed != 3 {
		t.Errorf("after the failed rollback: deploys %d, failed %d, time to restore %+v: want 4 deploys, 3 failed, one sample and 2 unrestored (4 and the rollback)",
			got.DeploymentFrequency.Deploys, got.ChangeFailureRate.Failed, ttr)
	}
	run(art, "5", "", manent.StateSuccess)
	got = dora()
	if ttr := got.TimeToRestoreSeconds; ttr.Samples != 3 || ttr.Unrestored != 0 || got.DeploymentFrequency.Deploys != 5 {
		t.Errorf("after 5: deploys %d, time to restore %+v: want 5 deploys, three samples and nothing unrestored", got.DeploymentFrequency.Deploys, ttr)
	}
}

// A window reaching back into history retention.deploys removed says so:
// the figures there count only the deploys retention kept (current and
// previous releases, last failures), and looked whole. Only environments
// the caller may read can make a window partial.
func TestDORASaysRetentionMadeTheWindowPartial(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		tokens := []auth.TokenConfig{{Name: "stg", SHA256: auth.HashToken("stg-token")}}
		rules := []auth.RBACRule{{Subjects: []string{"token:stg"}, Permissions: []string{"deployment.read"},
			Applications: []string{"billing"}, Environments: []string{"staging"}}}
		ts := newTestServer(t, db, tokens, rules)
		ctx := context.Background()
		now := time.Now()
		for _, id := range seedDORA(t, ts.Store, now) {
			if err := ts.Store.WorkflowsDeleted(ctx, id, now); err != nil {
				t.Fatal(err)
			}
		}
		// billing/prod's deploys of 40 and 20 days ago go (neither is its
		// current or previous release nor its last failure); web/prod's
		// only deploy is its current release and stays.
		if n, err := ts.Store.PruneDeploys(ctx, now.Add(-15*day), 100); err != nil || n != 2 {
			t.Fatalf("pruned %d deploys, %v: want 2", n, err)
		}
		dora := func(query, token string) api.DORA {
			t.Helper()
			code, body, _ := do(t, http.MethodGet, ts.URL+"/api/v1/metrics/dora"+query, token, "")
			if code != http.StatusOK {
				t.Fatalf("%s: status %d: %s", query, code, body)
			}
			var d api.DORA
			if err := json.Unmarshal(body, &d); err != nil {
				t.Fatal(err)
			}
			return d
		}
		removed := now.Add(-20 * day).UTC()
		for _, q := range []string{"?application=billing&environment=prod", "", "?window=3w"} {
			d := dora(q, "admin-token")
			if d.Partial == nil || d.Partial.RemovedThrough.Sub(removed).Abs() > time.Millisecond ||
				!strings.Contains(d.Partial.Message, "retention.deploys removed deploys of billing/prod that finished up to "+removed.Format(time.RFC3339)) {
				t.Errorf("%s: partial %+v, want billing/prod's deploys removed through %s", q, d.Partial, removed.Format(time.RFC3339))
			}
		}
		for _, c := range []struct{ query, token string }{
			{"?application=billing&environment=prod&window=14d", "admin-token"}, // starts after what was removed
			{"?application=web&environment=prod", "admin-token"},                // nothing removed there
			{"?application=billing", "stg-token"},                               // prod is not the caller's to read
		} {
			if d := dora(c.query, c.token); d.Partial != nil {
				t.Errorf("%s as %s: partial %+v, want none", c.query, c.token, d.Partial)
			}
		}
	})
}

// A failure's time to restore does not change when retention.deploys
// removes the success that restored it (here a rollback): the failure was
// counted unrestored — an outage still open, though it had ended 19 days
// ago — because the next success left in the history is gone too. The
// restore is recorded on the failure when the success finishes.
func TestDORARestoreSurvivesRetention(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		ts := newTestServer(t, db, nil, nil)
		ctx := context.Background()
		now := time.Now()
		history := []seeded{
			{"billing", "prod", manent.StateSuccess, 25 * day, 0, "", 0},
			{"billing", "prod", manent.StateError, 20 * day, 0, "deploy", 0},    // restored a day later
			{"billing", "prod", manent.StateSuccess, 19 * day, 0, "", 0},        // the rollback that restored it
			{"billing", "prod", manent.StateCancelled, day, 0, "activation", 0}, // live: the current release, not restored
		}
		// The rollback deployed 1.0 again and the cancelled deploy is of 1.0
		// too: the release retention keeps before the current one is
		// 0.9's, and the rollback goes.
		ids := seedHistory(t, ts.Store, now, history, []string{"0.9", "2.0", "1.0", "1.0"})
		want := api.TimeToRestore{Median: new(86400.0), Samples: 1, Unrestored: 1}
		read := func(when string) api.DORA {
			t.Helper()
			code, body, _ := do(t, http.MethodGet, ts.URL+"/api/v1/metrics/dora?application=billing&environment=prod", "admin-token", "")
			if code != http.StatusOK {
				t.Fatalf("%s: status %d: %s", when, code, body)
			}
			var d api.DORA
			if err := json.Unmarshal(body, &d); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(d.TimeToRestoreSeconds, want) {
				got, _ := json.Marshal(d.TimeToRestoreSeconds)
				t.Errorf("%s: time to restore %s, want one sample of 86400 and one unrestored failure (the cancel)", when, got)
			}
			return d
		}
		read("before retention")
		for _, id := range ids {
			if err := ts.Store.WorkflowsDeleted(ctx, id, now); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := ts.Store.PruneDeploys(ctx, now.Add(-10*day), 100); err != nil || n != 1 {
			t.Fatalf("pruned %d deploys, %v: want 1 (the rollback)", n, err)
		}
		if d := read("after retention removed the rollback"); d.Partial == nil {
			t.Errorf("after retention: no partial, want the window said partial")
		}
	})
}

// The DORA figures of a long window are counted as the deploys are read:
// the request holds the samples the medians need, not the window's
// deploys. It read every deploy of the window into one slice (copied once
// more to count those that reached the environment), then the steps of
// every failure: 30,000 deploys held about 16 MB, per request, and a
// window of ten years reads the whole history.
func TestDORAMemoryDoesNotGrowWithTheWindow(t *testing.T) {
	if testing.Short() || raceEnabled {
		// Under the race detector its 210,000 inserts take a minute; the
		// request it measures is sequential.
		t.Skip("seeds 30,000 deploys")
	}
	srv := servertest.Start(t)
	seedDORABench(t, srv, 30000)
	req := httptest.NewRequest(http.MethodGet, "/api/v1/metrics/dora?window=3650d", nil)
	req.Header.Set("Authorization", "Bearer "+srv.Token)
	// What the last collection found live (not the garbage since).
	live := func() uint64 {
		runtime.GC()
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	before := live()
	// The live heap, measured again and again while the request runs.
	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if h := live(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	w := httptest.NewRecorder()
	srv.API.ServeHTTP(w, req)
	close(done)
	<-sampled
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var d api.DORA
	if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if d.DeploymentFrequency.Deploys != 28500 || d.ChangeFailureRate.Failed != 1779 {
		t.Fatalf("deploys %d, failed %d: want 28500 (those refused at config did not reach the environment), 1779 failed",
			d.DeploymentFrequency.Deploys, d.ChangeFailureRate.Failed)
	}
	grown := int64(peak.Load()) - int64(before)
	t.Logf("a DORA request over 30,000 deploys (%d lead and %d restore samples) held %.1f MB at most",
		d.LeadTimeSeconds.Samples, d.TimeToRestoreSeconds.Samples, float64(grown)/1e6)
	// 8 bytes a sample, and the slices' growth; not ~400 bytes a deploy.
	if limit := int64(6 << 20); grown > limit {
		t.Errorf("the request held %.1f MB at most, want under %.1f MB", float64(grown)/1e6, float64(limit)/1e6)
	}
}
