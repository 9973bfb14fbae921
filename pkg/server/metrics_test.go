package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/store"
)

var sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$`)

// scrape reads /metrics into "name{labels}" → value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := sampleRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", sc.Text(), err)
		}
		out[m[1]+m[2]] = v
	}
	return out
}

// TestMetricsFamilies scrapes /metrics after real deploys (a success, a
// failure, one waiting for approval) with an event stream open, and checks
// each family of SPEC §11.5.
func TestMetricsFamilies(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "governance.yaml")
	if err := os.WriteFile(rules, []byte("approvals:\n  - {environments: [prod], applications: [\"*\"], count: 1, approvers: [\"group:sre\"]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := newTestServer(t, enginetest.SQLite(t), govTokens, govRules, func(c *node.Config) { c.Governance.Rules = rules })
	ci := api.NewClient(srv.URL, "ci-token", nil)
	ctx := context.Background()
	art := artifactFile(t)
	// manent_sse_cut_total counts the streams cut in this process: with
	// -count or -shuffle, earlier tests of the package (TestSlowSubscriberIsCutOff)
	// have cut some already.
	cut := float64(server.StreamsCut())
	before := scrape(t, srv.URL)
	for fam, want := range map[string]float64{`manent_deploys_finished_total{state="SUCCESS"}`: 0, `manent_deploys_finished_total{state="ERROR"}`: 0,
		`manent_queue_depth{state="AWAITING_APPROVAL"}`: 0, `manent_sse_streams`: 0, `manent_sse_cut_total`: cut} {
		if v, ok := before[fam]; !ok || v != want {
			t.Errorf("before any deploy: %s = %v (present %v), want %v", fam, v, ok, want)
		}
	}
	ok, err := ci.Submit(ctx, simple(art, "staging", "1", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ci, ok.ID, manent.StateSuccess)
	bad, err := ci.Submit(ctx, simple(art, "staging", "2",
		"steps:\n  - {name: smoke, after: deploy, plugin: script, with: {command: [sh, -c, \"exit 1\"]}, max_retries: 0}\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ci, bad.ID, manent.StateError)
	// A step that fails twice, then succeeds: its failed attempts are
	// observed ERROR, as each attempt is, though the step stayed RUNNING
	// between them.
	count := filepath.Join(t.TempDir(), "count")
	flaky, err := ci.Submit(ctx, simple(art, "staging", "3", fmt.Sprintf(
		"steps:\n  - {name: flaky, after: deploy, plugin: script, with: {command: [sh, -c, \"n=$(cat %[1]s 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]s; [ $n -gt 2 ]\"]}, max_retries: 3}\n", count)), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ci, flaky.ID, manent.StateSuccess)
	held, err := ci.Submit(ctx, simple(art, "prod", "1", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ci, held.ID, manent.StateAwaitingApproval)

	// An event stream open on the waiting deploy.
	sctx, stop := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, srv.URL+"/api/v1/deployments/"+held.ID+"/events", nil)
	req.Header.Set("Authorization", "Bearer ci-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()

	m := scrape(t, srv.URL)
	want := map[string]float64{
		`manent_deploys_finished_total{state="SUCCESS"}`:                    2,
		`manent_step_duration_seconds_count{state="ERROR",step="flaky"}`:    2,
		`manent_step_duration_seconds_count{state="SUCCESS",step="flaky"}`:  1,
		`manent_deploys_finished_total{state="ERROR"}`:                      1,
		`manent_deploys_finished_total{state="CANCELLED"}`:                  0,
		`manent_queue_depth{state="AWAITING_APPROVAL"}`:                     1,
		`manent_queue_depth{state="ENQUEUED"}`:                              0,
		`manent_step_duration_seconds_count{state="SUCCESS",step="deploy"}`: 3,
		`manent_step_duration_seconds_count{state="ERROR",step="smoke"}`:    1,
		`manent_sse_streams`:   1,
		`manent_sse_cut_total`: float64(server.StreamsCut()),
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if m[`manent_step_duration_seconds_sum{state="SUCCESS",step="deploy"}`] <= 0 {
		t.Errorf("step duration sum of deploy is not positive")
	}
	if _, ok := m[`manent_step_duration_seconds_bucket{state="SUCCESS",step="deploy",le="+Inf"}`]; !ok {
		t.Errorf("no histogram buckets for the deploy step")
	}
	for k := range m {
		if strings.HasPrefix(k, "manent_step_duration_seconds") && strings.Contains(k, `state="RUNNING"`) {
			t.Errorf("a running step was observed: %s", k)
		}
	}
	// The stream closed: the gauge goes back to 0.
	stop()
	enginetest.Eventually(t, 10*time.Second, func() bool { return scrape(t, srv.URL)["manent_sse_streams"] == 0 },
		"manent_sse_streams to return to 0")
}

// TestMetricsSayWhenTheDatabaseCannotBeRead: the families read from the
// database at each scrape (manent_deployments, manent_queue_depth) cannot
// be counted while it does not answer; the scrape then fails (500, naming
// the error), so Prometheus records the target down with the reason. They
// were left out of a 200 answer without a
// word: a scrape said nothing was queued, and an alert on the queue stayed
// quiet through the outage.
func TestMetricsSayWhenTheDatabaseCannotBeRead(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	if got := scrape(t, srv.URL); got[`manent_deployments{state="SUCCESS"}`] != 0 || got[`manent_queue_depth{state="ENQUEUED"}`] != 0 {
		t.Fatalf("before: %v", got)
	}
	if _, ok := scrape(t, srv.URL)[`manent_queue_depth{state="ENQUEUED"}`]; !ok {
		t.Fatal("manent_queue_depth missing while the database answers")
	}
	srv.Store.Close() // the database no longer answers
	status, body, _ := do(t, "GET", srv.URL+"/metrics", "", "")
	if status != http.StatusInternalServerError || !strings.Contains(string(body), "manent_queue_depth") || !strings.Contains(string(body), "database is closed") {
		t.Fatalf("scrape with the database gone: %d\n%s\nwant 500 naming manent_queue_depth and the error", status, body)
	}
	// Nor does it say no worker is dead.
	if !strings.Contains(string(body), `"manent_workers"`) {
		t.Errorf("scrape with the database gone: %s\nwant it to name manent_workers too", body)
	}
}

// /metrics says how many workers the database knows by state
// (manent_workers, every state present from the start) and how many this
// process took over as leader, by reason (manent_worker_takeovers_total):
// an operator alerts on a dead worker from Prometheus. Neither was there:
// /metrics said nothing of workers.
func TestMetricsWorkers(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newTestServer(t, db, nil, nil, func(c *node.Config) {
			c.Workers.Heartbeat, c.Workers.DeadAfter = 250*time.Millisecond, 5*time.Second
		})
		m := scrape(t, srv.URL)
		for fam, want := range map[string]float64{`manent_workers{state="alive"}`: 1, `manent_workers{state="leaving"}`: 0,
			`manent_workers{state="dead"}`: 0, `manent_workers{state="taken_over"}`: 0,
			`manent_worker_takeovers_total{reason="dead"}`: 0, `manent_worker_takeovers_total{reason="left"}`: 0} {
			if v, ok := m[fam]; !ok || v != want {
				t.Errorf("at start: %s = %v (present %v), want %v", fam, v, ok, want)
			}
		}
		// Two more workers: one gone (dead), one that left.
		ctx := t.Context()
		for _, id := range []string{"gone", "left"} {
			if err := srv.Store.RegisterWorker(ctx, store.WorkerStart{ID: id, Version: "0", AppVersion: "0", Instance: id + "-1"}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := srv.Store.DeclareGone(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		if err := srv.Store.LeaveWorker(ctx, "left", "left-1"); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(db, "postgres") {
			// SQLite: no leader takes workers over while the server runs.
			m = scrape(t, srv.URL)
			for fam, want := range map[string]float64{`manent_workers{state="alive"}`: 1, `manent_workers{state="leaving"}`: 1,
				`manent_workers{state="dead"}`: 1, `manent_worker_takeovers_total{reason="dead"}`: 0, `manent_worker_takeovers_total{reason="left"}`: 0} {
				if v, ok := m[fam]; !ok || v != want {
					t.Errorf("with a worker gone and one leaving: %s = %v (present %v), want %v", fam, v, ok, want)
				}
			}
			return
		}
		// PostgreSQL: this server, the leader, takes both over; a worker
		// taken over is counted taken_over, no longer dead (an alert on
		// dead workers ends with their takeover).
		enginetest.Eventually(t, 60*time.Second, func() bool {
			m = scrape(t, srv.URL)
			return m[`manent_worker_takeovers_total{reason="dead"}`]+m[`manent_worker_takeovers_total{reason="left"}`] >= 2
		}, "the server to take both workers over")
		for fam, want := range map[string]float64{`manent_workers{state="alive"}`: 1, `manent_workers{state="leaving"}`: 0,
			`manent_workers{state="dead"}`: 0, `manent_workers{state="taken_over"}`: 2,
			`manent_worker_takeovers_total{reason="dead"}`: 1, `manent_worker_takeovers_total{reason="left"}`: 1} {
			if v, ok := m[fam]; !ok || v != want {
				t.Errorf("after the takeovers: %s = %v (present %v), want %v", fam, v, ok, want)
			}
		}
	})
}
