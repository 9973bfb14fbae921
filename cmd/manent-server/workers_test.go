package main_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/childproc"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// Several workers on one PostgreSQL database (SPEC §11.3), as real
// processes. Small heartbeat and dead_after keep the tests short; takeover
// must happen within dead_after + 15 s.
// MANENT_TEST_HEARTBEAT and MANENT_TEST_DEAD_AFTER override them (to
// measure takeover with the defaults, 5s and 30s).
var (
	testHeartbeat = envDuration("MANENT_TEST_HEARTBEAT", 250*time.Millisecond)
	testDeadAfter = envDuration("MANENT_TEST_DEAD_AFTER", 3*time.Second)
)

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

var workerEnv = []string{
	"MANENT_WORKERS_HEARTBEAT=" + testHeartbeat.String(),
	"MANENT_WORKERS_DEAD_AFTER=" + testDeadAfter.String(),
}

// launch starts manent-server as executor id without waiting for it.
func launch(t *testing.T, dir, db, id string) (*proc, <-chan string) {
	t.Helper()
	return launchEnv(t, dir, db, id)
}

// launchEnv is launch with more environment variables (MANENT_WORKERS_SLOTS=1).
func launchEnv(t *testing.T, dir, db, id string, env ...string) (*proc, <-chan string) {
	t.Helper()
	data := filepath.Join(dir, id)
	cmd := exec.Command(serverBin, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--database", db, "--executor-id", id)
	cmd.Env = append(append(append(os.Environ(), "MANENT_BOOTSTRAP_TOKEN=test-token", "MANENT_WORKERS_RETRY_BASE=20ms"), workerEnv...), env...)
	return launchCmd(t, cmd, data)
}

// startWorkers starts n workers at once on db and waits until each listens.
func startWorkers(t *testing.T, dir, db string, ids ...string) map[string]*proc {
	t.Helper()
	out := map[string]*proc{}
	chans := map[string]<-chan string{}
	for _, id := range ids {
		out[id], chans[id] = launch(t, dir, db, id)
	}
	for _, id := range ids {
		out[id].listen(t, chans[id], filepath.Join(dir, id, "server.log"))
	}
	return out
}

func workersByID(c *api.Client) map[string]api.Worker {
	res, err := c.Workers(context.Background())
	if err != nil {
		return nil
	}
	out := map[string]api.Worker{}
	for _, w := range res.Items {
		out[w.ID] = w
	}
	return out
}

// runner waits until one worker runs a deploy and returns its id.
func runner(t *testing.T, c *api.Client) string {
	t.Helper()
	var id string
	enginetest.Eventually(t, 30*time.Second, func() bool {
		for _, w := range workersByID(c) {
			if w.Running > 0 && w.State == "alive" {
				id = w.ID
				return true
			}
		}
		return false
	}, "a worker to run the deploy")
	return id
}

func other(ps map[string]*proc, not string) *proc {
	for id, p := range ps {
		if id != not {
			return p
		}
	}
	return nil
}

func waitFile(t *testing.T, path, what string) time.Time {
	t.Helper()
	enginetest.Eventually(t, 60*time.Second, func() bool { _, err := os.Stat(path); return err == nil }, "%s", what)
	return time.Now()
}

// Three workers start at once on an empty database: each migrates or waits
// for the one migrating, and all three come up alive.
func TestWorkersStartTogetherOnEmptyDatabase(t *testing.T) {
	t.Parallel()
	db := enginetest.Postgres(t)
	ps := startWorkers(t, t.TempDir(), db, "w1", "w2", "w3")
	c := ps["w2"].client()
	enginetest.Eventually(t, 10*time.Second, func() bool {
		ws := workersByID(c)
		return len(ws) == 3 && ws["w1"].State == "alive" && ws["w2"].State == "alive" && ws["w3"].State == "alive"
	}, "three alive workers (have %v)", workersByID(c))
}

// The worker running a deploy is killed mid-step: another worker takes it
// over within dead_after + 15 s and finishes it; completed steps do not run
// again; the next deploy of the environment does not start before it ends.
func TestWorkersTakeOverKilledWorker(t *testing.T) {
	t.Parallel()
	db := enginetest.Postgres(t)
	dir := t.TempDir()
	yml, effects, started, release := crashDescriptor(t, dir)
	ps := startWorkers(t, filepath.Join(dir, "w"), db, "w1", "w2", "w3")
	c := ps["w1"].client()
	res, err := c.Submit(context.Background(), []byte(yml), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, started, "the slow step to start")
	// A second deploy of the same environment waits behind the first.
	effects2 := effects + "2"
	yml2 := strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(yml, effects, effects2), started, started+"2"), `version: "1.0"`, `version: "2.0"`)
	res2, err := c.Submit(context.Background(), []byte(yml2), false)
	if err != nil {
		t.Fatal(err)
	}
	victim := runner(t, c)
	first := pidsIn(filepath.Join(dir, "slow-pids"))
	if len(first) != 1 || !childproc.Alive(first[0]) {
		t.Fatalf("slow step pids %v, want its running shell", first)
	}
	if err := ps[victim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-ps[victim].done
	killed := time.Now()
	if err := os.Remove(started); err != nil {
		t.Fatal(err)
	}
	live := other(ps, victim).client()
	resumed := waitFile(t, started, "the slow step to run again on another worker")
	// The killed worker's lifeline stopped the first attempt's command
	// (which waits for the release file) long before the takeover: the
	// step never ran twice at once.
	if childproc.Alive(first[0]) {
		t.Errorf("the slow step runs again on another worker while its first attempt (pid %d) still runs where the killed worker was", first[0])
	}
	t.Logf("takeover: the killed worker's step ran again %s after SIGKILL (dead_after %s, heartbeat %s)",
		resumed.Sub(killed).Round(10*time.Millisecond), testDeadAfter, testHeartbeat)
	if took := resumed.Sub(killed); took > testDeadAfter+15*time.Second {
		t.Errorf("takeover took %s, want within dead_after + 15 s", took)
	}
	// The takeover is recorded in the transaction that holds the dead
	// worker's row while DBOS recovers its workflows, so it commits just
	// after the recovered step may have started again.
	enginetest.Eventually(t, 10*time.Second, func() bool {
		w := workersByID(live)[victim]
		return w.State == "dead" && w.TakenOverBy != ""
	}, "killed worker listed dead and taken over (have %+v)", workersByID(live)[victim])
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := waitFinal(t, live, res.ID)
	if d.State != manent.StateSuccess {
		t.Fatalf("state = %s (%s), want SUCCESS", d.State, d.Error)
	}
	if got := countLines(t, effects); got["early"] != 1 || got["slow"] != 2 || got["late"] != 1 {
		t.Fatalf("side effects %v: want early 1, slow 2 (interrupted, then taken over), late 1", got)
	}
	for _, n := range []string{"config", "secrets", "artifacts", "qa", "early"} {
		if a := stepByName(d, n).Attempts; a != 1 {
			t.Errorf("step %s ran %d times, want 1 (completed before the kill)", n, a)
		}
	}
	d2 := waitFinal(t, live, res2.ID)
	if d2.State != manent.StateSuccess {
		t.Fatalf("second deploy: %s (%s), want SUCCESS", d2.State, d2.Error)
	}
	for _, s := range d2.Steps {
		if s.StartedAt != nil && d.FinishedAt != nil && s.StartedAt.Before(*d.FinishedAt) {
			t.Fatalf("step %s of the second deploy started at %s, before the first finished (%s): two deploys of one environment overlapped",
				s.Name, s.StartedAt, d.FinishedAt)
		}
	}
}

// A worker paused (SIGSTOP) past dead_after while its step runs is taken
// over. Its step's command, which nothing pauses, is stopped by the
// worker's lifeline when its lease lapses (cut-off), before another worker
// runs the step again. Resumed (SIGCONT), the worker finds itself cut off
// or declared dead and stops: it records nothing and runs no further step
// of the deploy, which the other worker finished.
// pauseRunner submits crashDescriptor's deploy yml through the first
// worker, waits for its slow step to start, pauses (SIGSTOP) the worker
// running it and removes the step's started file. It returns the deploy,
// the paused worker's id and the pids of the slow step's first attempt.
func pauseRunner(t *testing.T, ps map[string]*proc, yml, dir, started string) (*api.SubmitResult, string, []int) {
	t.Helper()
	c := ps["w1"].client()
	res, err := c.Submit(context.Background(), []byte(yml), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, started, "the slow step to start")
	victim := runner(t, c)
	first := pidsIn(filepath.Join(dir, "slow-pids"))
	if len(first) != 1 || !childproc.Alive(first[0]) {
		t.Fatalf("slow step pids %v, want its running shell", first)
	}
	if err := ps[victim].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(started); err != nil {
		t.Fatal(err)
	}
	return res, victim, first
}

func TestWorkersPausedWorkerIsFenced(t *testing.T) {
	t.Parallel()
	db := enginetest.Postgres(t)
	dir := t.TempDir()
	yml, effects, started, release := crashDescriptor(t, dir)
	ps := startWorkers(t, filepath.Join(dir, "w"), db, "w1", "w2", "w3")
	res, victim, first := pauseRunner(t, ps, yml, dir, started)
	stopped := time.Now()
	live := other(ps, victim).client()
	resumed := waitFile(t, started, "the slow step to run again on another worker")
	t.Logf("takeover of a paused worker: %s after SIGSTOP (dead_after %s)", resumed.Sub(stopped).Round(10*time.Millisecond), testDeadAfter)
	if childproc.Alive(first[0]) {
		t.Errorf("the slow step runs again on another worker while its first attempt (pid %d) still runs under the paused worker", first[0])
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := waitFinal(t, live, res.ID)
	if d.State != manent.StateSuccess {
		t.Fatalf("state = %s (%s), want SUCCESS", d.State, d.Error)
	}
	if err := ps[victim].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ps[victim].done:
	case <-time.After(30 * time.Second):
		t.Fatal("the resumed worker did not stop after learning it was declared dead")
	}
	if ps[victim].waitErr() == nil {
		t.Error("the fenced worker exited 0, want an error exit")
	}
	b, _ := os.ReadFile(filepath.Join(dir, "w", victim, "server.log"))
	if !strings.Contains(string(b), "declared dead") && !strings.Contains(string(b), "cut off") {
		t.Errorf("the fenced worker's log says neither that it was declared dead nor that it was cut off:\n%s", b)
	}
	if !strings.Contains(string(b), "manent lifeline: the worker's heartbeat has not reached the database for too long") {
		t.Errorf("the paused worker's lifeline did not say it stopped the step:\n%s", b)
	}
	if got := countLines(t, effects); got["early"] != 1 || got["slow"] != 2 || got["late"] != 1 {
		t.Fatalf("side effects %v: want early 1, slow 2 (paused, then taken over), late 1 — the resumed worker must run nothing", got)
	}
	after, err := live.Deployment(context.Background(), res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.State != manent.StateSuccess || stepByName(after, "late").State != manent.StepSuccess {
		t.Fatalf("after the resumed worker stopped: %s, late %s — it must not have rewritten the deploy", after.State, stepByName(after, "late").State)
	}
}

// `manent-server admin recover` of a paused worker (SIGSTOP: it still
// holds its step's command, which nothing pauses) hands its deploy back to
// the queue only once the worker's lifeline has stopped that command: the
// step never runs on two workers at once. (It watched for two heartbeats,
// shorter than the lifeline's cut-off: QA saw both attempts run 5.6 s
// together with the defaults.)
func TestWorkersAdminRecoverOfAPausedWorker(t *testing.T) {
	t.Parallel()
	db := enginetest.Postgres(t)
	dir := t.TempDir()
	yml, _, started, release := crashDescriptor(t, dir)
	ps := startWorkers(t, filepath.Join(dir, "w"), db, "w1", "w2")
	res, victim, first := pauseRunner(t, ps, yml, dir, started)
	rec := exec.Command(serverBin, "admin", "recover", "--executor-id", victim, "--database", db, "--data-dir", filepath.Join(dir, "admin"))
	rec.Env = append(os.Environ(), workerEnv...)
	out, err := rec.CombinedOutput()
	if err != nil {
		t.Fatalf("admin recover: %v\n%s", err, out)
	}
	if childproc.Alive(first[0]) {
		t.Errorf("admin recover handed the deploy back while its step's first attempt (pid %d) still runs under the paused worker:\n%s", first[0], out)
	}
	waitFile(t, started, "the slow step to run again")
	if childproc.Alive(first[0]) {
		t.Errorf("the slow step runs again while its first attempt (pid %d) still runs", first[0])
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if d := waitFinal(t, other(ps, victim).client(), res.ID); d.State != manent.StateSuccess {
		t.Fatalf("state = %s (%s), want SUCCESS", d.State, d.Error)
	}
}

// blackhole is a TCP proxy on loopback in front of PostgreSQL whose cut
// makes the network vanish for the worker behind it, as a partition does:
// connections stay open, but nothing goes through any more, and new ones
// are accepted and never answered. Nothing is refused or reset. Not
// enginetest.PGProxy: its Cut closes the connections and refuses new ones
// (a database restarting), which a worker sees at once; a partition is
// silence, seen only when its heartbeats time out.
type blackhole struct {
	ln  net.Listener
	cut atomic.Bool
}

func newBlackhole(t *testing.T, upstream string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln}
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range open {
			c.Close()
		}
	})
	// relay copies until the cut, then reads and drops.
	relay := func(dst, src net.Conn) {
		defer conns.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 && !b.cut.Load() {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			if b.cut.Load() {
				conns.Add(1)
				go func() { defer conns.Done(); _, _ = io.Copy(io.Discard, c) }()
				continue
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			open = append(open, up)
			mu.Unlock()
			conns.Add(2)
			go relay(up, c)
			go relay(c, up)
		}
	}()
	return b
}

// via returns the database URL db reached through the proxy.
func (b *blackhole) via(t *testing.T, db string) string {
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = b.ln.Addr().String()
	return u.String()
}

// A worker cut off from the database while its step runs (a network
// partition: the worker lives on, its heartbeats vanish) stops that step's
// processes and exits before the others may declare it dead, so the step
// taken over elsewhere never runs beside its first attempt.
func TestWorkersCutOffWorkerStopsItsSteps(t *testing.T) {
	t.Parallel()
	db := enginetest.Postgres(t)
	dir := t.TempDir()
	yml, effects, started, release := crashDescriptor(t, dir)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	bh := newBlackhole(t, u.Host)
	ps := startWorkers(t, filepath.Join(dir, "w"), bh.via(t, db), "w1")
	res, err := ps["w1"].client().Submit(context.Background(), []byte(yml), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, started, "the slow step to start")
	first := pidsIn(filepath.Join(dir, "slow-pids"))
	if len(first) != 1 || !childproc.Alive(first[0]) {
		t.Fatalf("slow step pids %v, want its running shell", first)
	}
	for id, p := range startWorkers(t, filepath.Join(dir, "w"), db, "w2") {
		ps[id] = p
	}
	if err := os.Remove(started); err != nil {
		t.Fatal(err)
	}
	bh.cut.Store(true)
	cut := time.Now()
	select {
	case <-ps["w1"].done:
		t.Logf("the cut-off worker exited %s after the cut (dead_after %s): %v", time.Since(cut).Round(10*time.Millisecond), testDeadAfter, ps["w1"].waitErr())
	case <-time.After(testDeadAfter + 30*time.Second):
		t.Fatal("the worker cut off from the database did not stop")
	}
	if ps["w1"].waitErr() == nil {
		t.Error("the cut-off worker exited 0, want an error exit")
	}
	waitFile(t, started, "the slow step to run again on another worker")
	if fi, err := os.Stat(started); err == nil {
		t.Logf("takeover of a cut-off worker: the step ran again %s after the cut", fi.ModTime().Sub(cut).Round(10*time.Millisecond))
	}
	if childproc.Alive(first[0]) {
		t.Errorf("the slow step runs again on another worker while its first attempt (pid %d) still runs where the cut-off worker was", first[0])
	}
	b, _ := os.ReadFile(filepath.Join(dir, "w", "w1", "server.log"))
	if !strings.Contains(string(b), "cut off") {
		t.Errorf("the cut-off worker's log does not say it was cut off:\n%s", b)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := waitFinal(t, ps["w2"].client(), res.ID)
	if d.State != manent.StateSuccess {
		t.Fatalf("state = %s (%s), want SUCCESS", d.State, d.Error)
	}
	if got := countLines(t, effects); got["early"] != 1 || got["slow"] != 2 || got["late"] != 1 {
		t.Fatalf("side effects %v: want early 1, slow 2 (cut off, then taken over), late 1", got)
	}
}

// SIGTERM: the worker lets its running step finish, runs no new one and
// leaves; another worker takes the deploy over at once (no dead_after
// wait) and runs the remaining steps; nothing runs twice.
func TestWorkersSIGTERMHandsOver(t *testing.T) {
	t.Parallel()
	db := enginetest.Postgres(t)
	dir := t.TempDir()
	yml, effects, started, release := crashDescriptor(t, dir)
	ps := startWorkers(t, filepath.Join(dir, "w"), db, "w1", "w2")
	c := ps["w1"].client()
	res, err := c.Submit(context.Background(), []byte(yml), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, started, "the slow step to start")
	victim := runner(t, c)
	if err := ps[victim].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The running step finishes.
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ps[victim].done:
		if ps[victim].waitErr() != nil {
			t.Fatalf("exit after SIGTERM: %v, want 0", ps[victim].waitErr())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("no exit within 40s of SIGTERM")
	}
	left := time.Now()
	live := other(ps, victim).client()
	d := waitFinal(t, live, res.ID)
	t.Logf("handover after SIGTERM: deploy finished %s after the worker exited", time.Since(left).Round(10*time.Millisecond))
	if d.State != manent.StateSuccess {
		t.Fatalf("state = %s (%s), want SUCCESS", d.State, d.Error)
	}
	if got := countLines(t, effects); got["early"] != 1 || got["slow"] != 1 || got["late"] != 1 {
		t.Fatalf("side effects %v: want each step once (the running step finished before the worker left)", got)
	}
	if w := workersByID(live)[victim]; w.State != "dead" || w.TakenOverBy == "" {
		t.Errorf("the worker that left is listed as %+v, want taken over", w)
	}
}

// One process per executor id (SPEC §11.3). While worker w1 runs a step,
// a second manent-server started with its id — on another data_dir, as on
// another host, or on w1's own — stops with an error naming the reason and
// touches nothing: the step runs on, once. w1 killed and started again on
// its data_dir resumes its deploy at once, without waiting for dead_after.
func TestWorkersExecutorIDInUse(t *testing.T) {
	t.Parallel()
	db := enginetest.Postgres(t)
	dir := t.TempDir()
	yml, effects, started, release := crashDescriptor(t, dir)
	wdir := filepath.Join(dir, "w")
	ps := startWorkers(t, wdir, db, "w1")
	res, err := ps["w1"].client().Submit(context.Background(), []byte(yml), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, started, "the slow step to start")
	first := pidsIn(filepath.Join(dir, "slow-pids"))
	if len(first) != 1 {
		t.Fatalf("slow step pids %v", first)
	}
	dup := func(data string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, serverBin, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--database", db, "--executor-id", "w1")
		cmd.Env = append(append(os.Environ(), "MANENT_BOOTSTRAP_TOKEN=test-token"), workerEnv...)
		out, err := combinedOutput(cmd)
		if err == nil || ctx.Err() != nil {
			t.Fatalf("a second process with executor id w1 (data_dir %s): %v, want it to stop with an error:\n%s", data, err, out)
		}
		return string(out)
	}
	if out := dup(filepath.Join(dir, "elsewhere")); !strings.Contains(out, "executor id w1 is in use: another manent-server") ||
		!strings.Contains(out, "still beating") {
		t.Fatalf("from another data_dir:\n%s", out)
	}
	if out := dup(filepath.Join(wdir, "w1")); !strings.Contains(out, "executor id w1 is in use: another manent-server on this host") {
		t.Fatalf("on w1's own data_dir:\n%s", out)
	}
	// Nor does admin recover hand a live worker's deploys to the queue.
	rec := exec.Command(serverBin, "admin", "recover", "--executor-id", "w1", "--database", db, "--data-dir", filepath.Join(dir, "admin"))
	rec.Env = append(os.Environ(), workerEnv...)
	if out, err := rec.CombinedOutput(); err == nil || !strings.Contains(string(out), "worker w1 is alive: it beat") {
		t.Fatalf("admin recover of a live worker: %v\n%s", err, out)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "admin", "procs", "*")); len(left) > 0 {
		t.Fatalf("admin recover left %v behind", left)
	}
	if !childproc.Alive(first[0]) || len(pidsIn(filepath.Join(dir, "slow-pids"))) != 1 {
		t.Fatalf("the step's first attempt was stopped or ran again: pids %v", pidsIn(filepath.Join(dir, "slow-pids")))
	}
	if w := workersByID(ps["w1"].client())["w1"]; w.State != "alive" {
		t.Fatalf("w1 is %q after the refused starts, want alive", w.State)
	}
	// A crash and a restart where it ran: its predecessor is known dead.
	if err := ps["w1"].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-ps["w1"].done
	p, addrc := launch(t, wdir, db, "w1")
	p.listen(t, addrc, filepath.Join(wdir, "w1", "server.log"))
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := waitFinal(t, p.client(), res.ID)
	if d.State != manent.StateSuccess {
		t.Fatalf("state = %s (%s), want SUCCESS", d.State, d.Error)
	}
	if got := countLines(t, effects); got["early"] != 1 || got["slow"] != 2 || got["late"] != 1 {
		t.Fatalf("side effects %v: want early 1, slow 2 (interrupted, then resumed), late 1", got)
	}
	if b, _ := os.ReadFile(filepath.Join(wdir, "w1", "server.log")); strings.Contains(string(b), "waiting until it has been silent") {
		t.Fatalf("the restarted worker waited for dead_after on its own seat:\n%s", b)
	}
}

// With SQLite a second server on the same database file refuses to start,
// however its path is written: the same text, a symbolic link to the file
// or to its directory, a relative path from another working directory, a
// hard link (the file itself is locked too: two names would each have
// their own -wal file).
func TestSQLiteSecondServerRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(real, "manent.db")
	startAs(t, filepath.Join(dir, "a"), "sqlite:"+file, "a")
	if err := os.Symlink(file, filepath.Join(dir, "link.db")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(file, filepath.Join(dir, "hard.db")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, cwd, db string }{
		{"same path", dir, "sqlite:" + file},
		{"symbolic link to the file", dir, "sqlite:" + filepath.Join(dir, "link.db")},
		{"symbolic link to its directory", dir, "sqlite:" + filepath.Join(dir, "linkdir", "manent.db")},
		{"relative through a link", filepath.Join(dir, "linkdir"), "sqlite:./manent.db"},
		{"dot-dot", filepath.Join(dir, "a"), "sqlite:../real/./manent.db"},
		{"hard link", dir, "sqlite:" + filepath.Join(dir, "hard.db")},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(serverBin, "serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "b"), "--database", c.db)
			cmd.Dir = c.cwd
			cmd.Env = append(os.Environ(), "MANENT_BOOTSTRAP_TOKEN=test-token")
			var buf bytes.Buffer
			cmd.Stdout, cmd.Stderr = &buf, &buf
			p, err := childproc.Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.Done():
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-p.Done()
				t.Fatalf("a second server on %s started beside the first:\n%s", c.db, buf.Bytes())
			}
			out := buf.Bytes()
			if p.Err() == nil {
				t.Fatalf("a second server on %s started:\n%s", c.db, out)
			}
			// A hard link cannot be resolved to the first server's name.
			names := file
			if c.name == "hard link" {
				names = "another name of it, a hard link, is in use"
			}
			if !strings.Contains(string(out), "another manent-server uses this SQLite database") || !strings.Contains(string(out), names) {
				t.Fatalf("second server's error does not say why, naming %s:\n%s", names, out)
			}
		})
	}
}

// A rolling restart of all three workers (SIGTERM, start again) while 50
// deploys in 10 environments run: every deploy ends SUCCESS and every
// deploy's step ran exactly once.
func TestWorkersRollingRestart(t *testing.T) {
	t.Parallel()
	db := enginetest.Postgres(t)
	dir := t.TempDir()
	art := filepath.Join(dir, "app.txt")
	if err := os.WriteFile(art, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	effects := filepath.Join(dir, "effects")
	ids := []string{"w1", "w2", "w3"}
	ps := startWorkers(t, filepath.Join(dir, "w"), db, ids...)
	c := ps["w1"].client()
	var deploys []string
	for i := range 50 {
		yml := fmt.Sprintf(`apiVersion: manent/v1
application: roll
environment: env%d
version: "%d"
artifact: {url: "file://%s"}
steps:
  - {name: work, after: qa, plugin: script, with: {command: [sh, -c, "sleep 0.3; echo $MANENT_DEPLOY_ID >> %s"]}}
`, i%10, i, art, effects)
		res, err := c.Submit(context.Background(), []byte(yml), false)
		if err != nil {
			t.Fatal(err)
		}
		deploys = append(deploys, res.ID)
	}
	for _, id := range ids {
		if err := ps[id].cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ps[id].done:
			if ps[id].waitErr() != nil {
				t.Fatalf("%s exited with %v after SIGTERM", id, ps[id].waitErr())
			}
		case <-time.After(40 * time.Second):
			t.Fatalf("%s did not stop within 40s", id)
		}
		p, addrc := launch(t, filepath.Join(dir, "w"), db, id)
		p.listen(t, addrc, filepath.Join(dir, "w", id, "server.log"))
		ps[id] = p
	}
	c = ps["w2"].client()
	for _, id := range deploys {
		if d := waitFinal(t, c, id); d.State != manent.StateSuccess {
			t.Fatalf("%s: %s (%s), want SUCCESS", id, d.State, d.Error)
		}
	}
	got := countLines(t, effects)
	for _, id := range deploys {
		if got[id] != 1 {
			t.Errorf("the step of %s ran %d times, want once", id, got[id])
		}
	}
}

// lazyWorkers prints the workers c lists, when a failure message is made.
type lazyWorkers struct{ c *api.Client }

func (l lazyWorkers) String() string { return fmt.Sprint(workersByID(l.c)) }

// lazyTail prints the last 40 lines of a file, when a failure message is
// made.
type lazyTail struct{ path string }

func (l lazyTail) String() string {
	b, _ := os.ReadFile(l.path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}

// A deploy taken over from a killed worker goes back to the queue; while
// no worker has a free slot (the other runs a deploy of another
// environment and has one slot), status and activity say it waits for one
// — it was shown running its interrupted step, which ran nowhere.
func TestWorkersTakenOverDeployWaitsForASlot(t *testing.T) {
	t.Parallel()
	db := enginetest.Postgres(t)
	dir := t.TempDir()
	yml, _, started, release := crashDescriptor(t, dir)
	started2 := started + "-other"
	yml2 := strings.ReplaceAll(strings.ReplaceAll(yml, started, started2), "environment: test", "environment: other")
	wdir := filepath.Join(dir, "w")
	ps := map[string]*proc{}
	for _, id := range []string{"w1", "w2"} {
		p, addrc := launchEnv(t, wdir, db, id, "MANENT_WORKERS_SLOTS=1")
		p.listen(t, addrc, filepath.Join(wdir, id, "server.log"))
		ps[id] = p
	}
	c := ps["w2"].client()
	var ids []string
	for _, y := range []string{yml, yml2} {
		res, err := c.Submit(context.Background(), []byte(y), false)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	waitFile(t, started, "the first deploy's slow step to start")
	waitFile(t, started2, "the second deploy's slow step to start")
	// Both slow steps are listed RUNNING (after startRecordDelay) before w1
	// dies.
	for _, id := range ids {
		enginetest.Eventually(t, 30*time.Second, func() bool {
			d, err := c.Deployment(context.Background(), id)
			return err == nil && slices.ContainsFunc(d.Steps, func(s manent.Step) bool { return s.Name == "slow" && s.State == manent.StepRunning })
		}, "the slow step of %s to be listed RUNNING", id)
	}
	if err := ps["w1"].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-ps["w1"].done
	want := "waiting for a free worker slot (taken over from w1)"
	var queued *manent.Deployment
	seen := map[string]string{} // what each deploy last said, for a failure
	enginetest.Eventually(t, testDeadAfter+30*time.Second, func() bool {
		for _, id := range ids {
			d, err := c.Deployment(context.Background(), id)
			if err != nil {
				seen[id] = err.Error()
				continue
			}
			seen[id] = fmt.Sprintf("%s queued=%v reason=%q", d.State, d.Queued, d.Reason)
			if strings.Contains(d.Reason, want) {
				queued = d
				return true
			}
		}
		return false
	}, "a deploy taken over from w1 to say it waits for a free worker slot (last seen: %v; workers: %v)\nw2's log:\n%v", seen, lazyWorkers{c}, lazyTail{filepath.Join(wdir, "w2", "server.log")})
	if !queued.Queued || queued.State != manent.StatePending {
		t.Errorf("taken-over deploy: state %s, queued %v; want PENDING and queued", queued.State, queued.Queued)
	}
	// Its interrupted step runs nowhere: status and steps list it pending,
	// saying why (it was listed RUNNING).
	steps, err := c.Steps(context.Background(), queued.ID)
	if err != nil {
		t.Fatal(err)
	}
	for what, list := range map[string][]manent.Step{"status": queued.Steps, "steps": steps} {
		interrupted := 0
		for _, st := range list {
			if st.State == manent.StepRunning {
				t.Errorf("%s lists step %s RUNNING on a deploy waiting in the queue", what, st.Name)
			}
			if st.State == manent.StepPending && strings.Contains(st.Error, "interrupted on w1") {
				interrupted++
			}
		}
		if interrupted != 1 {
			t.Errorf("%s lists %d steps saying they were interrupted on w1, want 1: %+v", what, interrupted, list)
		}
	}
	act, err := c.Activity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range act.Environments {
		for _, it := range g.Items {
			if it.ID != queued.ID {
				continue
			}
			found = true
			if why := it.Why(); strings.Contains(why, "running") || !strings.Contains(why, want) || !it.Queued {
				t.Errorf("activity of the taken-over deploy: %q (queued %v), want it waiting for a free worker slot, not running", why, it.Queued)
			}
		}
	}
	if !found {
		t.Errorf("activity does not list %s", queued.ID)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if d := waitFinal(t, c, id); d.State != manent.StateSuccess {
			t.Fatalf("%s: %s (%s), want SUCCESS", id, d.State, d.Error)
		}
	}
}

// A waiting deploy whose gate ran on a worker that died says so until the
// gate resumes elsewhere: its reason, written by that gate, goes stale
// (DELAYED "schedule.at …" after that time passed; AWAITING_APPROVAL
// "approvals 0/1" after an approval). Only a running deploy said so.
func TestWorkersWaitingDeployOnADeadWorker(t *testing.T) {
	t.Parallel()
	db := enginetest.Postgres(t)
	dir := t.TempDir()
	yml, _, _, release := crashDescriptor(t, dir)
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wdir := filepath.Join(dir, "w")
	ps := startWorkers(t, wdir, db, "w1")
	at := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	res, err := ps["w1"].client().Submit(context.Background(), []byte(yml+"schedule: {at: "+at+"}\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != manent.StateDelayed {
		t.Fatalf("state %s, want DELAYED", res.State)
	}
	// Its gate runs on w1, the only worker; w2 joins, then w1 dies. w2
	// declares w1 dead only after 15 s: the reason is shown from two
	// heartbeats after the kill until w2 takes the gate over, a window
	// that dead_after's 3 s made too short to be seen on a loaded machine
	// (CI missed it once).
	w2, ready := launchEnv(t, wdir, db, "w2", "MANENT_WORKERS_DEAD_AFTER=15s")
	w2.listen(t, ready, filepath.Join(wdir, "w2", "server.log"))
	ps["w2"] = w2
	if err := ps["w1"].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-ps["w1"].done
	c := ps["w2"].client()
	want := "its gate ran on worker w1, silent for "
	var reason string
	enginetest.Eventually(t, 45*time.Second, func() bool {
		d, err := c.Deployment(context.Background(), res.ID)
		if err != nil {
			return false
		}
		if d.Reason != reason {
			t.Logf("%s: %s", d.State, d.Reason)
		}
		reason = d.Reason
		return d.State == manent.StateDelayed && strings.Contains(d.Reason, want)
	}, "the delayed deploy to say its gate's worker is silent")
	if !strings.Contains(reason, "it resumes on another worker within workers.dead_after") {
		t.Errorf("reason %q does not say what happens next", reason)
	}
	if d := waitFinal(t, c, res.ID); d.State != manent.StateSuccess {
		t.Fatalf("state %s (%s), want SUCCESS once its gate is taken over", d.State, d.Error)
	}
}
