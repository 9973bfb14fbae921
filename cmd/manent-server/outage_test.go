package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/childproc"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// PostgreSQL going away under a running server: a restart, a failover, a
// pooler that kills its connections. The shared PostgreSQL is never
// restarted: a loopback proxy in front of it closes every connection and
// refuses new ones (cut), then lets them through again (heal).

// rawGet answers status, header and body of one request to the server,
// with no retry, bounded by timeout.
func rawGet(t *testing.T, method, u string, body string, timeout time.Duration) (int, http.Header, []byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer test-token")
	if body != "" {
		req.Header.Set("Content-Type", "application/yaml")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// unavailable checks that an answer given while the database is away is a
// 503 problem+json saying so, with Retry-After.
func unavailable(t *testing.T, what string, status int, h http.Header, body []byte, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s while the database is away: no answer: %v", what, err)
		return
	}
	if status != http.StatusServiceUnavailable {
		t.Errorf("%s while the database is away: HTTP %d %s, want 503", what, status, body)
		return
	}
	if ct := h.Get("Content-Type"); !strings.Contains(ct, "problem+json") {
		t.Errorf("%s: Content-Type %q, want problem+json", what, ct)
	}
	if h.Get("Retry-After") == "" {
		t.Errorf("%s: 503 without Retry-After", what)
	}
	var p api.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Errorf("%s: not a problem: %s", what, body)
	}
	if !strings.Contains(p.Detail, "database") {
		t.Errorf("%s: detail %q does not say the database is unavailable", what, p.Detail)
	}
}

// A deploy whose step runs while PostgreSQL is away for a few seconds (a
// restart, a failover) and comes back: the step is not killed nor run
// twice, the deploy ends SUCCESS; meanwhile reads and submissions answer
// 503 saying the database cannot be reached, and the server needs no
// restart.
func TestOutageShortKeepsTheStep(t *testing.T) {
	db, px := enginetest.ProxiedPostgres(t)
	dir := t.TempDir()
	yml, effects, started, release := crashDescriptor(t, dir)
	// cut-off: 2/3 × 15 s − 0.5 s = 9.5 s, well past the 5 s outage.
	w, addrc := launchEnv(t, filepath.Join(dir, "w"), db, "w1", "MANENT_WORKERS_HEARTBEAT=500ms", "MANENT_WORKERS_DEAD_AFTER=15s")
	w.listen(t, addrc, filepath.Join(dir, "w", "w1", "server.log"))
	c := w.client()
	res, err := c.Submit(context.Background(), []byte(yml), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, started, "the slow step to start")
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "w", "w1", "server.log"))
			t.Logf("server log:\n%s", b)
		}
	})

	follow := followDone(t, w.addr, res.ID)
	px.Cut()
	cut := time.Now()
	const outage = 5 * time.Second
	healed := make(chan struct{})
	go func() {
		defer close(healed)
		<-time.After(outage) // the outage's length, not a synchronisation
		px.Heal()
	}()
	t.Cleanup(func() { <-healed })

	status, h, body, err := rawGet(t, http.MethodGet, w.addr+"/api/v1/deployments/"+res.ID, "", 4*time.Second)
	unavailable(t, "status", status, h, body, err)
	status, h, body, err = rawGet(t, http.MethodPost, w.addr+"/api/v1/deployments", strings.Replace(yml, `version: "1.0"`, `version: "2.0"`, 1), 4*time.Second)
	unavailable(t, "a submission", status, h, body, err)
	status, h, body, err = rawGet(t, http.MethodGet, w.addr+"/readyz", "", 4*time.Second)
	unavailable(t, "/readyz", status, h, body, err)
	// The step ends while the database is still away.
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if time.Since(cut) > outage {
		t.Logf("the answers during the outage took %s, past the outage", time.Since(cut))
	}
	<-healed
	d := waitFinal(t, c, res.ID)
	select {
	case <-w.done:
		b, _ := os.ReadFile(filepath.Join(dir, "w", "w1", "server.log"))
		t.Fatalf("the server exited after a %s outage: %v\n%s", outage, w.waitErr(), b)
	default:
	}
	if d.State != manent.StateSuccess {
		b, _ := os.ReadFile(filepath.Join(dir, "w", "w1", "server.log"))
		t.Fatalf("state = %s (%s), want SUCCESS\n%s", d.State, d.Error, b)
	}
	if got := countLines(t, effects); got["early"] != 1 || got["slow"] != 1 || got["late"] != 1 {
		t.Fatalf("side effects %v: want each step once", got)
	}
	select {
	case saw := <-follow:
		if !saw {
			t.Error("the stream followed across the outage ended without the deploy's done event")
		}
	case <-time.After(30 * time.Second):
		t.Error("the stream followed across the outage did not see the deploy end within 30 s of its end")
	}
	list, err := c.List(context.Background(), api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("%d deploys listed, want the one submitted before the outage (the one refused during it was not stored)", len(list.Items))
	}
}

// gatedDescriptor is a deploy of environment env whose step "work" appends
// label to effects, touches <dir>/<label>.started and waits for
// <dir>/<label>.release.
func gatedDescriptor(dir, env, label, effects string) (yml, started, release string) {
	started, release = filepath.Join(dir, label+".started"), filepath.Join(dir, label+".release")
	work := fmt.Sprintf(`echo %s >> %s; touch %s; i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; [ -e %s ]`,
		label, effects, started, release, release)
	yml = fmt.Sprintf(`apiVersion: manent/v1
application: outage
environment: %s
version: %q
artifact: {url: "file://%s"}
steps:
  - {name: work, after: qa, plugin: script, with: {command: [sh, -c, %q]}}
`, env, label, filepath.Join(dir, "app.txt"), work)
	return yml, started, release
}

// terminateBackends ends every connection to db's database but the
// caller's (pg_terminate_backend, as a pooler or an operator does) and
// returns how many it ended.
func terminateBackends(t *testing.T, db string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()) t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// followDone follows deploy id's event stream, from when it has sent its
// first event, and reports on the channel whether it saw the done event
// (false when the stream ended without it).
func followDone(t *testing.T, addr, id string) <-chan bool {
	t.Helper()
	out := make(chan bool, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+"/api/v1/deployments/"+id+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer test-token")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	replayed := make(chan struct{})
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		first := true
		for sc.Scan() {
			if first && strings.HasPrefix(sc.Text(), "id: ") {
				first = false
				close(replayed)
			}
			if sc.Text() == "event: done" {
				out <- true
				return
			}
		}
		if first {
			close(replayed)
		}
		out <- false
	}()
	// The stream has replayed what was stored: it follows live events now.
	select {
	case <-replayed:
	case <-time.After(30 * time.Second):
		t.Fatal("the event stream sent nothing within 30 s")
	}
	return out
}

// Every connection of a running server to PostgreSQL is ended at once
// (pg_terminate_backend: a pooler's restart, an operator, a failover)
// while deploys run and one waits in its environment's queue: nothing is
// lost or run twice, a follower of the stream sees the end, and the
// server goes on serving — the queue runner, the heartbeat and the event
// poller reconnect — without a restart.
func TestOutageConnectionsTerminated(t *testing.T) {
	t.Parallel()
	db := enginetest.Postgres(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.txt"), []byte("release"), 0o644); err != nil {
		t.Fatal(err)
	}
	effects := filepath.Join(dir, "effects")
	w, addrc := launchEnv(t, filepath.Join(dir, "w"), db, "w1", "MANENT_WORKERS_HEARTBEAT=500ms", "MANENT_WORKERS_DEAD_AFTER=15s")
	w.listen(t, addrc, filepath.Join(dir, "w", "w1", "server.log"))
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "w", "w1", "server.log"))
			t.Logf("server log:\n%s", b)
		}
	})
	c := w.client()
	type dep struct{ id, started, release string }
	deps := map[string]*dep{}
	for _, x := range []struct{ env, label string }{{"a", "a1"}, {"b", "b1"}, {"a", "a2"}} {
		yml, started, release := gatedDescriptor(dir, x.env, x.label, effects)
		res, err := c.Submit(context.Background(), []byte(yml), false)
		if err != nil {
			t.Fatal(err)
		}
		deps[x.label] = &dep{res.ID, started, release}
		if x.label != "a2" {
			waitFile(t, started, x.label+"'s step to start")
		}
	}
	follow := followDone(t, w.addr, deps["a2"].id)
	if n := terminateBackends(t, db); n == 0 {
		t.Fatal("no connection to terminate")
	}
	// The server answers again, with the deploys it had.
	enginetest.Eventually(t, 30*time.Second, func() bool {
		status, _, _, err := rawGet(t, http.MethodGet, w.addr+"/api/v1/deployments/"+deps["a1"].id, "", 5*time.Second)
		return err == nil && status == http.StatusOK
	}, "the server to answer after its connections were ended")
	for _, l := range []string{"a1", "b1"} {
		if err := os.WriteFile(deps[l].release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	waitFile(t, deps["a2"].started, "the queued deploy to start after the first of its environment")
	if err := os.WriteFile(deps["a2"].release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for l, d := range deps {
		if got := waitFinal(t, c, d.id); got.State != manent.StateSuccess {
			t.Errorf("%s: state %s (%s), want SUCCESS", l, got.State, got.Error)
		}
	}
	select {
	case saw := <-follow:
		if !saw {
			t.Error("the follower's stream ended without the deploy's done event")
		}
	case <-time.After(30 * time.Second):
		t.Error("the follower did not see the deploy end within 30 s of its end")
	}
	// A new deploy after it all runs, on the same server.
	yml, started, release := gatedDescriptor(dir, "b", "b2", effects)
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := c.Submit(context.Background(), []byte(yml), false)
	if err != nil {
		t.Fatal(err)
	}
	if got := waitFinal(t, c, res.ID); got.State != manent.StateSuccess {
		t.Errorf("b2: state %s (%s), want SUCCESS", got.State, got.Error)
	}
	waitFile(t, started, "b2's step to have run")
	if got := countLines(t, effects); got["a1"] != 1 || got["b1"] != 1 || got["a2"] != 1 || got["b2"] != 1 {
		t.Fatalf("side effects %v: want each deploy's step once", got)
	}
	if ws := workersByID(c); ws["w1"].State != "alive" {
		t.Errorf("worker w1 is %q after its connections were ended, want alive", ws["w1"].State)
	}
	select {
	case <-w.done:
		t.Fatalf("the server exited: %v", w.waitErr())
	default:
	}
}

// PostgreSQL away for longer than workers.dead_after, with one worker: it
// stops its step's processes and exits at its cut-off, before anyone could
// declare it dead (docs/operations.md, "Liveness, takeover and fencing");
// started again once the database is back (its supervisor's part), it
// resumes the deploy from its last recorded step, once.
func TestOutageLongerThanDeadAfter(t *testing.T) {
	db, px := enginetest.ProxiedPostgres(t)
	dir := t.TempDir()
	yml, effects, started, release := crashDescriptor(t, dir)
	log := filepath.Join(dir, "w", "w1", "server.log")
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("server log:\n%s", b)
		}
	})
	w, addrc := launch(t, filepath.Join(dir, "w"), db, "w1")
	w.listen(t, addrc, log)
	res, err := w.client().Submit(context.Background(), []byte(yml), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, started, "the slow step to start")
	first := pidsIn(filepath.Join(dir, "slow-pids"))
	if len(first) != 1 || !childproc.Alive(first[0]) {
		t.Fatalf("slow step pids %v, want its running shell", first)
	}
	if err := os.Remove(started); err != nil {
		t.Fatal(err)
	}
	px.Cut()
	cut := time.Now()
	select {
	case <-w.done:
		t.Logf("the worker exited %s after the database went away (dead_after %s): %v", time.Since(cut).Round(10*time.Millisecond), testDeadAfter, w.waitErr())
	case <-time.After(testDeadAfter + 30*time.Second):
		t.Fatal("the worker did not stop while the database stayed away")
	}
	if since := time.Since(cut); since > testDeadAfter {
		t.Errorf("the worker stopped %s after the database went away, past dead_after %s", since, testDeadAfter)
	}
	if w.waitErr() == nil {
		t.Error("the worker exited 0, want an error exit")
	}
	if childproc.Alive(first[0]) {
		t.Errorf("the step's process (pid %d) outlives its worker", first[0])
	}
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), "cut off") {
		t.Errorf("the worker's log does not say it was cut off from the database")
	}
	px.Heal()
	w2, addrc := launch(t, filepath.Join(dir, "w"), db, "w1")
	w2.listen(t, addrc, log)
	waitFile(t, started, "the slow step to run again once the database is back")
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := waitFinal(t, w2.client(), res.ID)
	if d.State != manent.StateSuccess {
		t.Fatalf("state = %s (%s), want SUCCESS", d.State, d.Error)
	}
	if got := countLines(t, effects); got["early"] != 1 || got["slow"] != 2 || got["late"] != 1 {
		t.Fatalf("side effects %v: want early 1, slow 2 (stopped at the cut-off, then resumed), late 1", got)
	}
}

// A step waiting between two attempts when PostgreSQL goes away: its next
// attempt, due during the outage and within the heartbeat's freshness (no
// heartbeat is checked before it), waits for the database instead of
// failing on its read of the cancel flag — which spent the attempt
// (max_retries 1) and failed the deploy, its command not run again.
func TestOutageBetweenAttempts(t *testing.T) {
	db, px := enginetest.ProxiedPostgres(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.txt"), []byte("release"), 0o644); err != nil {
		t.Fatal(err)
	}
	effects, failed := filepath.Join(dir, "effects"), filepath.Join(dir, "failed-once")
	flaky := fmt.Sprintf(`echo flaky >> %s; if [ ! -e %s ]; then touch %s; exit 1; fi`, effects, failed, failed)
	yml := fmt.Sprintf(`apiVersion: manent/v1
application: outage
environment: retry
version: "1"
artifact: {url: "file://%s"}
steps:
  - {name: flaky, after: qa, plugin: script, max_retries: 1, with: {command: [sh, -c, %q]}}
`, filepath.Join(dir, "app.txt"), flaky)
	log := filepath.Join(dir, "w", "w1", "server.log")
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("server log:\n%s", b)
		}
	})
	// The defaults' heartbeat (5 s, fresh for 10 s); the second attempt
	// comes 1 s after the first failed, inside the 5 s outage; the
	// cut-off (15 s) is past it.
	w, addrc := launchEnv(t, filepath.Join(dir, "w"), db, "w1", "MANENT_WORKERS_HEARTBEAT=5s", "MANENT_WORKERS_DEAD_AFTER=30s", "MANENT_WORKERS_RETRY_BASE=1s")
	w.listen(t, addrc, log)
	c := w.client()
	res, err := c.Submit(context.Background(), []byte(yml), false)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 60*time.Second, func() bool {
		d, err := c.Deployment(context.Background(), res.ID)
		return err == nil && stepByName(d, "flaky").Retrying()
	}, "the step to wait for its second attempt")
	px.Cut()
	healed := make(chan struct{})
	go func() {
		defer close(healed)
		<-time.After(5 * time.Second) // the outage's length, not a synchronisation
		px.Heal()
	}()
	t.Cleanup(func() { <-healed })
	<-healed
	d := waitFinal(t, c, res.ID)
	if d.State != manent.StateSuccess {
		t.Fatalf("state = %s (%s), want SUCCESS", d.State, d.Error)
	}
	if got := countLines(t, effects); got["flaky"] != 2 {
		t.Fatalf("side effects %v: want the step's command twice (failed, then passed)", got)
	}
}
