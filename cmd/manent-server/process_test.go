package main_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/childproc"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// These tests run the real manent-server binary, because a process dying
// is the point: SIGKILL mid-step, SIGTERM, restart.

var serverBin string

// serverBinEnv names the manent-server a helper run of this test binary
// uses (TestServerDiesWithTheTestBinary), so that it builds none.
const serverBinEnv = "MANENT_TEST_SERVER_BIN"

func TestMain(m *testing.M) {
	if bin := os.Getenv(serverBinEnv); bin != "" {
		serverBin = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "manent-server-bin")
	if err != nil {
		panic(err)
	}
	serverBin = filepath.Join(dir, "manent-server")
	out, err := exec.Command("go", "build", "-o", serverBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build manent-server: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type proc struct {
	cmd   *exec.Cmd
	addr  string
	done  <-chan struct{} // closed when the process has exited
	child *childproc.Process
}

// waitErr is what the process's Wait returned, once done is closed.
func (p *proc) waitErr() error { return p.child.Err() }

var listening = regexp.MustCompile(`listening on (http://\S+)`)

// A test that starts servers (start, startWith, startArgs, startAs,
// launch, launchEnv, startWorkers) mostly waits on its servers, so it calls
// t.Parallel() when it touches no process-wide state: no t.Setenv, no
// os.Chdir, no package-level variable it sets, no scan of every process
// on the machine (lifelineOf looks only at its own server's children), and
// no narrow wall-clock window. Each such test has its own temp dir (data
// dirs, markers, SQLite file), its own database (enginetest.Postgres and
// ProxiedPostgres: a random database name per call) and loopback ports of
// its own. Parallel tests run once the serial ones are done. Kept serial:
// the outage tests whose requests or retries must fall inside a 5 s outage
// (TestOutageShortKeepsTheStep, TestOutageBetweenAttempts) or whose worker
// must stop within dead_after (TestOutageLongerThanDeadAfter), the SIGTERM
// tests timed against shutdown_delay or a 10 s bound
// (TestSIGTERMWithShutdownDelayIsNotReadyFirst, TestSIGTERMEndsOpenStreams),
// TestScheduleSurvivesRestart (2 s ticks around a 5 s outage),
// TestServerDiesWithTheTestBinary, TestChaosGuard and
// TestUpgradeFromOldRelease. Subtests keep their parent's fixture and stay
// sequential.

// start runs manent-server on a random loopback port and waits until it listens.
func start(t *testing.T, dataDir, db string) *proc {
	t.Helper()
	return startWith(t, dataDir, db, "MANENT_EXECUTOR_ID=crash-worker")
}

func startWith(t *testing.T, dataDir, db string, env ...string) *proc {
	t.Helper()
	return startArgs(t, nil, dataDir, db, env...)
}

// startArgs is startWith with more arguments to `serve` (--config).
func startArgs(t testing.TB, args []string, dataDir, db string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(serverBin, serveArgs(dataDir, db, args...)...)
	cmd.Env = append(append(os.Environ(), "MANENT_BOOTSTRAP_TOKEN=test-token", "MANENT_WORKERS_RETRY_BASE=20ms"), env...)
	return startCmd(t, cmd, dataDir)
}

// serveArgs is the arguments of `manent-server serve` on a random loopback
// port, with args after them.
func serveArgs(dataDir, db string, args ...string) []string {
	return append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--database", db}, args...)
}

// startCmd starts cmd, a manent-server serve (perhaps wrapped), logging to
// <dataDir>/server.log, and waits until it listens.
func startCmd(t testing.TB, cmd *exec.Cmd, dataDir string) *proc {
	t.Helper()
	p, addrc := launchCmd(t, cmd, dataDir)
	p.listen(t, addrc, filepath.Join(dataDir, "server.log"))
	return p
}

// launchCmd starts cmd, a manent-server serve (perhaps wrapped), logging
// to <dataDir>/server.log, without waiting for it: the channel gives the
// address it listens on. The server is killed when the test ends, and on
// Linux when the test binary dies however it dies (childproc.Start): a CI
// timeout or a kill -9 left servers running, holding their ports, files
// and PostgreSQL connections.
func launchCmd(t testing.TB, cmd *exec.Cmd, dataDir string) (*proc, <-chan string) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(dataDir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	cmd.Stderr = logf
	child, err := childproc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: child.Done(), child: child}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addrc <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // one a test stopped
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p, addrc
}

// listen waits until the process listens, and fails t if it exits first or
// takes longer than 60s (log: its log file).
func (p *proc) listen(t testing.TB, addrc <-chan string, log string) {
	t.Helper()
	select {
	case p.addr = <-addrc:
	case <-p.done:
		b, _ := os.ReadFile(log)
		t.Fatalf("manent-server exited before listening: %v\n%s", p.waitErr(), b)
	case <-time.After(60 * time.Second):
		t.Fatal("manent-server did not listen within 60s")
	}
}

// combinedOutput is cmd.CombinedOutput with the child started by
// childproc.Start: a manent-server expected to refuse to start dies with
// the test binary too if it started after all.
func combinedOutput(cmd *exec.Cmd) ([]byte, error) {
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := childproc.Run(cmd)
	return b.Bytes(), err
}

func (p *proc) client() *api.Client { return api.NewClient(p.addr, "test-token", nil) }

// crashDescriptor has script steps that each append their name to effects
// once per run, and a slow step that waits for the release file.
func crashDescriptor(t *testing.T, dir string) (yml, effects, started, release string) {
	art := filepath.Join(dir, "app.txt")
	if err := os.WriteFile(art, []byte("release"), 0o644); err != nil {
		t.Fatal(err)
	}
	effects, started, release = filepath.Join(dir, "effects"), filepath.Join(dir, "started"), filepath.Join(dir, "release")
	rec := func(name string) string { return fmt.Sprintf("echo %s >> %s", name, effects) }
	// The slow step also notes its shell's pid in <dir>/slow-pids.
	slow := fmt.Sprintf(`%s; echo $$ >> %s; touch %s; i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; [ -e %s ]`,
		rec("slow"), filepath.Join(dir, "slow-pids"), started, release, release)
	yml = fmt.Sprintf(`apiVersion: manent/v1
application: crash
environment: test
version: "1.0"
artifact: {url: "file://%s"}
steps:
  - {name: early, after: qa, plugin: script, with: {command: [sh, -c, %q]}}
  - {name: slow, after: early, plugin: script, with: {command: [sh, -c, %q]}}
  - {name: late, after: activation, plugin: script, with: {command: [sh, -c, %q]}}
`, art, rec("early"), slow, rec("late"))
	return yml, effects, started, release
}

func countLines(t *testing.T, path string) map[string]int {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		out[l]++
	}
	return out
}

func waitFinal(t *testing.T, c *api.Client, id string) *manent.Deployment {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	d, err := c.Wait(ctx, id, 100*time.Millisecond)
	if err != nil {
		t.Fatalf("wait %s: %v", id, err)
	}
	return d
}

func stepByName(d *manent.Deployment, name string) manent.Step {
	for _, s := range d.Steps {
		if s.Name == name {
			return s
		}
	}
	return manent.Step{}
}

// A server killed with SIGKILL in the middle of a step and restarted with
// the same executor id resumes the deploy: completed steps do not run
// again, the interrupted one does.
func TestSIGKILLMidStepResumes(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		dir := t.TempDir()
		data := filepath.Join(dir, "data")
		yml, effects, started, release := crashDescriptor(t, dir)

		p := start(t, data, db)
		res, err := p.client().Submit(context.Background(), []byte(yml), false)
		if err != nil {
			t.Fatal(err)
		}
		enginetest.Eventually(t, 60*time.Second, func() bool { _, err := os.Stat(started); return err == nil }, "slow step to start")
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.done
		if err := os.Remove(started); err != nil {
			t.Fatal(err)
		}

		p2 := start(t, data, db)
		// The interrupted step runs again after the restart.
		enginetest.Eventually(t, 60*time.Second, func() bool { _, err := os.Stat(started); return err == nil }, "slow step to run again")
		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		d := waitFinal(t, p2.client(), res.ID)
		if d.State != manent.StateSuccess {
			t.Fatalf("state after restart = %s (%s), want SUCCESS", d.State, d.Error)
		}
		got := countLines(t, effects)
		if got["early"] != 1 || got["late"] != 1 || got["slow"] != 2 {
			t.Fatalf("side effects %v: want early 1, slow 2 (interrupted, then re-run), late 1", got)
		}
		for _, n := range []string{"config", "secrets", "artifacts", "qa", "early"} {
			if a := stepByName(d, n).Attempts; a != 1 {
				t.Errorf("step %s ran %d times, want 1 (completed before the crash)", n, a)
			}
		}
		cur, err := os.Readlink(filepath.Join(data, "targets", "crash", "test", "current"))
		if err != nil || filepath.Base(cur) != "1.0" {
			t.Fatalf("current -> %q, %v", cur, err)
		}
	})
}

// SIGTERM stops the server cleanly (exit 0) even with a step running; the
// deploy is finished after a restart.
func TestSIGTERMGracefulThenResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	db := enginetest.SQLite(t)
	yml, _, started, release := crashDescriptor(t, dir)
	p := start(t, data, db)
	res, err := p.client().Submit(context.Background(), []byte(yml), false)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 60*time.Second, func() bool { _, err := os.Stat(started); return err == nil }, "slow step to start")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		if p.waitErr() != nil {
			t.Fatalf("manent-server exited with %v after SIGTERM, want 0", p.waitErr())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("manent-server did not stop within 60s of SIGTERM")
	}
	p2 := start(t, data, db)
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if d := waitFinal(t, p2.client(), res.ID); d.State != manent.StateSuccess {
		t.Fatalf("state = %s (%s), want SUCCESS", d.State, d.Error)
	}
}

// startAs runs manent-server with an executor id and extra environment.
func startAs(t *testing.T, dataDir, db, executor string, env ...string) *proc {
	t.Helper()
	return startWith(t, dataDir, db, append([]string{"MANENT_EXECUTOR_ID=" + executor}, env...)...)
}

// A worker killed for good: `manent-server admin recover --executor-id`
// hands its deploy to a live worker, which finishes it (PostgreSQL: several
// workers share one database).
func TestAdminRecoverHandsDeadWorkersDeploys(t *testing.T) {
	t.Parallel()
	db := enginetest.Postgres(t)
	dir := t.TempDir()
	yml, effects, started, release := crashDescriptor(t, dir)
	dead := startAs(t, filepath.Join(dir, "a"), db, "worker-a")
	res, err := dead.client().Submit(context.Background(), []byte(yml), false)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 60*time.Second, func() bool { _, err := os.Stat(started); return err == nil }, "slow step to start on worker-a")
	if err := dead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-dead.done
	_ = os.Remove(started)
	// worker-a's machine is gone, its disk with it: worker-b must fetch the
	// artifact again.
	if err := os.RemoveAll(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	live := startAs(t, filepath.Join(dir, "b"), db, "worker-b")
	out, err := exec.Command(serverBin, "admin", "recover", "--executor-id", "worker-a", "--database", db, "--data-dir", filepath.Join(dir, "admin")).CombinedOutput()
	if err != nil {
		t.Fatalf("admin recover: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), res.ID) {
		t.Fatalf("admin recover did not name %s:\n%s", res.ID, out)
	}
	enginetest.Eventually(t, 60*time.Second, func() bool { _, err := os.Stat(started); return err == nil }, "slow step to run again on worker-b")
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := waitFinal(t, live.client(), res.ID)
	if d.State != manent.StateSuccess {
		t.Fatalf("state = %s (%s), want SUCCESS", d.State, d.Error)
	}
	if got := countLines(t, effects); got["early"] != 1 || got["late"] != 1 {
		t.Fatalf("side effects %v: completed steps must not run again", got)
	}
}

// A deploy resumed more often than workers.max_recovery_attempts ends
// MAX_RECOVERY_ATTEMPTS_EXCEEDED, and that is the state users see.
func TestMaxRecoveryAttemptsExceeded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	db := enginetest.SQLite(t)
	yml, _, started, _ := crashDescriptor(t, dir)
	env := "MANENT_WORKERS_MAX_RECOVERY_ATTEMPTS=1"
	p := startAs(t, data, db, "crash-worker", env)
	res, err := p.client().Submit(context.Background(), []byte(yml), false)
	if err != nil {
		t.Fatal(err)
	}
	for crash := 0; crash < 2; crash++ {
		enginetest.Eventually(t, 60*time.Second, func() bool { _, err := os.Stat(started); return err == nil }, "slow step to start (run %d)", crash+1)
		_ = os.Remove(started)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.done
		p = startAs(t, data, db, "crash-worker", env)
		var d *manent.Deployment
		exceeded := func() bool {
			d, err = p.client().Deployment(context.Background(), res.ID)
			return err == nil && d.State == manent.StateMaxRecoveryAttemptsExceeded
		}
		if crash == 1 {
			enginetest.Eventually(t, 60*time.Second, exceeded, "deploy to end MAX_RECOVERY_ATTEMPTS_EXCEEDED")
			if d.FinishedAt == nil || d.Error == "" {
				t.Fatalf("final deploy %+v: want finished_at and an error", d)
			}
		}
	}
}

// SIGKILL in the middle of a compensation: after a restart the rollback
// completes, and the deploy is ERROR with rollback completed.
func TestSIGKILLDuringRollbackCompletes(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		dir := t.TempDir()
		data := filepath.Join(dir, "data")
		art := filepath.Join(dir, "app.txt")
		if err := os.WriteFile(art, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		effects, started, release := filepath.Join(dir, "effects"), filepath.Join(dir, "started"), filepath.Join(dir, "release")
		cmd := fmt.Sprintf(`echo $MANENT_STEP >> %[1]s; case $MANENT_STEP in
  post-test) exit 1;;
  rollback:deploy) touch %[2]s; i=0; while [ ! -e %[3]s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; [ -e %[3]s ];;
esac`, effects, started, release)
		yml := fmt.Sprintf(`apiVersion: manent/v1
application: rb
environment: test
version: "2"
artifact: {url: "file://%s"}
target: {plugin: script, with: {command: [sh, -c, %q]}}
rollback: {enabled: true, on: [post-test]}
max_retries: 0
`, art, cmd)
		p := start(t, data, db)
		res, err := p.client().Submit(context.Background(), []byte(yml), false)
		if err != nil {
			t.Fatal(err)
		}
		enginetest.Eventually(t, 60*time.Second, func() bool { _, err := os.Stat(started); return err == nil }, "rollback:deploy to start")
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.done
		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		p2 := start(t, data, db)
		d := waitFinal(t, p2.client(), res.ID)
		if d.State != manent.StateError || d.Rollback != manent.RollbackCompleted {
			t.Fatalf("state %s rollback %q (%s), want ERROR with rollback completed", d.State, d.Rollback, d.Error)
		}
		got := countLines(t, effects)
		if got["deploy"] != 1 || got["post-test"] != 1 || got["rollback:deploy"] != 2 {
			t.Fatalf("actions %v: want deploy 1, post-test 1, rollback:deploy 2 (interrupted, then resumed)", got)
		}
	})
}

// A recurring deploy across a server outage: after a restart the ticks
// missed while no worker ran are backfilled, and no tick runs twice.
func TestScheduleSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	db := enginetest.SQLite(t)
	art := filepath.Join(dir, "app.txt")
	if err := os.WriteFile(art, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	yml := fmt.Sprintf("apiVersion: manent/v1\napplication: cron\nenvironment: test\nversion: \"1\"\nartifact: {url: \"file://%s\"}\nschedule: {cron: \"@every 2s\"}\n", art)
	// Ticks every 2 s: below the default schedules.min_interval.
	env := []string{"MANENT_WORKERS_SCHEDULER_POLL=1s", "MANENT_SCHEDULES_MIN_INTERVAL=1s"}
	p := startAs(t, data, db, "cron-worker", env...)
	res, err := p.client().Submit(context.Background(), []byte(yml), false)
	if err != nil {
		t.Fatal(err)
	}
	ticks := func(c *api.Client) []string {
		l, err := c.List(context.Background(), api.ListOptions{Application: "cron", Limit: 500})
		if err != nil {
			return nil
		}
		var out []string
		for _, d := range l.Items {
			out = append(out, d.ID)
		}
		return out
	}
	enginetest.Eventually(t, 60*time.Second, func() bool { return len(ticks(p.client())) >= 1 }, "a first tick")
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	down := time.Now()
	// The outage: the server stays down for 5 s, about two ticks.
	outage := time.NewTimer(5 * time.Second)
	<-outage.C
	p2 := startAs(t, data, db, "cron-worker", env...)
	var ids []string
	enginetest.Eventually(t, 60*time.Second, func() bool {
		ids = ticks(p2.client())
		for _, id := range ids {
			at, err := time.Parse(time.RFC3339, strings.TrimPrefix(id, res.Schedule+"@"))
			if err == nil && at.After(down.Add(2*time.Second)) && at.Before(down.Add(5*time.Second)) {
				return true
			}
		}
		return false
	}, "the ticks of the outage to be backfilled (have %v)", ids)
	// One deploy per tick: the tick times are 2 s apart, none doubled.
	var times []time.Time
	for _, id := range ids {
		at, err := time.Parse(time.RFC3339, strings.TrimPrefix(id, res.Schedule+"@"))
		if err != nil {
			t.Fatalf("deploy id %s: %v", id, err)
		}
		times = append(times, at)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap < 2*time.Second {
			t.Fatalf("ticks %s and %s are %s apart: a tick ran twice", times[i-1], times[i], gap)
		}
	}
}

// pidsIn reads the pids listed in path.
func pidsIn(path string) []int {
	b, _ := os.ReadFile(path)
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// With shutdown_delay, SIGTERM first makes /readyz answer 503 "shutting
// down" while every other request is still served — a load balancer stops
// sending requests before the server refuses them — then the server stops
// as before (exit 0).
func TestSIGTERMWithShutdownDelayIsNotReadyFirst(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	p := startWith(t, data, enginetest.SQLite(t), "MANENT_SHUTDOWN_DELAY=4s")
	get := func(path string) (int, string) {
		resp, err := http.Get(p.addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before SIGTERM: %d %s", code, body)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 10*time.Second, func() bool {
		code, body := get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "not ready: shutting down")
	}, "/readyz to answer 503 shutting down after SIGTERM")
	// Still serving: the API answers during the delay.
	if _, err := p.client().List(context.Background(), api.ListOptions{}); err != nil {
		t.Fatalf("a request during shutdown_delay: %v", err)
	}
	select {
	case <-p.done:
		if p.waitErr() != nil {
			t.Fatalf("manent-server exited with %v after SIGTERM, want 0", p.waitErr())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("manent-server did not stop within 60s of SIGTERM")
	}
	if b, _ := os.ReadFile(filepath.Join(data, "server.log")); !strings.Contains(string(b), "shutting down in 4s (shutdown_delay)") {
		t.Errorf("the log does not say it waits shutdown_delay:\n%s", b)
	}
}

// SIGTERM ends the open event streams (a browser on a deploy's page, `logs
// -f`, `deploy --wait`) with a last comment, and the server stops without
// waiting on them: the HTTP shutdown waited its whole 10 s for them, and a
// pod's terminationGracePeriodSeconds (40: shutdown_delay 10 s, the drain's
// 20 s) ran out before the worker marked itself leaving.
func TestSIGTERMEndsOpenStreams(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	p := start(t, data, enginetest.SQLite(t))
	req, err := http.NewRequest(http.MethodGet, p.addr+"/api/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer test-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/events: %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "retry:") {
		t.Fatalf("the stream's first line: %q, %v", line, err)
	}
	rest := make(chan string, 1)
	go func() { b, _ := io.ReadAll(br); rest <- string(b) }()
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		if p.waitErr() != nil {
			t.Fatalf("manent-server exited with %v after SIGTERM, want 0", p.waitErr())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("manent-server did not stop within 60s of SIGTERM")
	}
	// Without streams the stop takes about a second; the HTTP shutdown's
	// own bound is 10 s, which an open stream used to take whole.
	if took := time.Since(sent); took >= 10*time.Second {
		t.Errorf("manent-server took %s to stop with an event stream open: it waited for the stream", took.Round(time.Millisecond))
	}
	if got := <-rest; !strings.Contains(got, ": stream ended: the server is shutting down") {
		t.Errorf("the stream's end: %q, want a last comment saying the server is shutting down", got)
	}
}
