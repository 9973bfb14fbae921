package plugin

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitUntil polls cond every 20 ms until it holds or d passes.
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
	return cond()
}

// runWithLifeline starts a Procs with its lifeline and runs `sh -c script`
// as a step of it; script writes the pids the test needs, space-separated,
// to the file named by $PIDS. It waits until want pids are written and the
// step's group is registered, and returns the Procs, the pids (the group's
// leader first) and what Run returns once it has.
func runWithLifeline(t *testing.T, script string, want int) (*Procs, []int, <-chan error) {
	t.Helper()
	dir := t.TempDir()
	procs := NewProcs(filepath.Join(dir, "procs"), 500*time.Millisecond)
	if err := procs.StartLifeline(nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(procs.Close)
	pidFile := filepath.Join(dir, "pids")
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PIDS=" + pidFile}
	ran := make(chan error, 1)
	go func() { ran <- procs.Run(context.Background(), testContext(dir, &bytes.Buffer{}), cmd) }()
	var pids []int
	if !waitUntil(10*time.Second, func() bool {
		b, err := os.ReadFile(pidFile)
		pids = pids[:0]
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
		procs.mu.Lock()
		defer procs.mu.Unlock()
		return err == nil && len(pids) == want && len(procs.running) == 1
	}) {
		t.Fatal("the step's command did not start, or its group was not registered")
	}
	return procs, pids, ran
}

// checkKilled checks that the step's Run returned a failure once its group
// pgid was stopped, and that none of its processes pids is left.
func checkKilled(t *testing.T, ran <-chan error, pids []int, pgid int) {
	t.Helper()
	select {
	case err := <-ran:
		if err == nil {
			t.Fatal("the step's command ended well, want it killed")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return once its group was stopped")
	}
	for _, pid := range pids {
		if s, ok := readStat(pid); ok && !s.dead() && s.start != 0 && s.pgrp == pgid {
			t.Fatalf("process %d of the step still alive", pid)
		}
	}
}

// When the worker dies, its lifeline stops the process groups of the steps
// still running — the leader and what it started in its group — without
// the worker. The worker's death is what the kernel does to the pipe when
// it dies: its end closes without a word (the test closes it).
func TestLifelineStopsStepsOfADeadWorker(t *testing.T) {
	// A leader that ignores SIGTERM, and a child in its group.
	procs, pids, ran := runWithLifeline(t, `trap '' TERM; sleep 300 & echo $$ $! > "$PIDS"; wait`, 2)
	pgid := pids[0]
	procs.mu.Lock()
	l := procs.line
	procs.mu.Unlock()
	l.w.Close() // the worker "dies": its end of the pipe closes, no del sent
	if !waitUntil(15*time.Second, func() bool { return !groupAlive(pgid) }) {
		t.Fatalf("group %d still alive 15 s after its worker died", pgid)
	}
	checkKilled(t, ran, pids, pgid)
}

// A worker that is alive but silent (paused, cut off from the database)
// renews no lease: when the lease lapses, the lifeline stops the groups
// running then, SIGKILL after the lease's grace, and reads on — a group
// registered afterwards is still stopped when the worker dies. While the
// lease is renewed, nothing is stopped.
func TestLifelineLeaseLapseStopsSteps(t *testing.T) {
	procs, pids, ran := runWithLifeline(t, `trap '' TERM; sleep 300 & echo $$ $! > "$PIDS"; wait`, 2)
	pgid := pids[0]
	renew := time.NewTicker(50 * time.Millisecond) // the worker's heartbeats
	for i := 0; i < 20; i++ {
		procs.Lease(400*time.Millisecond, 200*time.Millisecond)
		<-renew.C
	}
	renew.Stop()
	if !groupAlive(pgid) {
		t.Fatal("the group was stopped while its lease was renewed")
	}
	lapsed := time.Now()
	if !waitUntil(15*time.Second, func() bool { return !groupAlive(pgid) }) {
		t.Fatalf("group %d (ignoring SIGTERM) still alive 15 s after its lease lapsed", pgid)
	}
	t.Logf("stopped %s after the lease lapsed (lease 400ms, grace 200ms)", time.Since(lapsed).Round(10*time.Millisecond))
	checkKilled(t, ran, pids, pgid)

	// The lifeline goes on: the same process registers a new group and
	// stops it when the worker dies.
	procs.mu.Lock()
	l := procs.line
	procs.mu.Unlock()
	select {
	case <-l.exited:
		t.Fatal("the lifeline exited when the lease lapsed")
	default:
	}
	procs.Lease(time.Hour, 200*time.Millisecond)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pids")
	cmd := exec.Command("sh", "-c", `echo $$ > "$PIDS"; exec sleep 300`)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PIDS=" + pidFile}
	ran2 := make(chan error, 1)
	go func() { ran2 <- procs.Run(context.Background(), testContext(dir, &bytes.Buffer{}), cmd) }()
	var second int
	if !waitUntil(10*time.Second, func() bool {
		b, _ := os.ReadFile(pidFile)
		second, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		procs.mu.Lock()
		defer procs.mu.Unlock()
		return second > 0 && len(procs.running) == 1
	}) {
		t.Fatal("the second command did not start, or its group was not registered")
	}
	procs.mu.Lock()
	same := procs.line == l
	procs.mu.Unlock()
	if !same {
		t.Fatal("the lifeline was replaced")
	}
	l.w.Close() // the worker dies
	if !waitUntil(15*time.Second, func() bool { return !groupAlive(second) }) {
		t.Fatalf("group %d, registered after the lapse, still alive after the worker died", second)
	}
	<-ran2
}

// Once its lease has lapsed, a worker starts no step command: paused
// between the engine's check and the command's start, it must not run the
// step another worker may be running already. A renewed lease lets it.
func TestLeaseLapsedStartsNoCommand(t *testing.T) {
	dir := t.TempDir()
	procs := NewProcs(filepath.Join(dir, "procs"), 500*time.Millisecond)
	if err := procs.StartLifeline(nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(procs.Close)
	ran := filepath.Join(dir, "ran")
	run := func() error {
		cmd := exec.Command("sh", "-c", `echo x >> "$RAN"`)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "RAN=" + ran}
		return procs.Run(context.Background(), testContext(dir, &bytes.Buffer{}), cmd)
	}
	procs.Lease(20*time.Millisecond, 0)
	lapse := time.Now().Add(20 * time.Millisecond)
	waitUntil(time.Second, func() bool { return time.Now().After(lapse) })
	if err := run(); !errors.Is(err, ErrLeaseLapsed) {
		t.Fatalf("Run after the lease lapsed: %v, want ErrLeaseLapsed", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the command ran after the lease lapsed")
	}
	procs.Lease(time.Hour, 0)
	if err := run(); err != nil {
		t.Fatalf("Run with a lease: %v", err)
	}
	if b, _ := os.ReadFile(ran); string(b) != "x\n" {
		t.Fatalf("the command's output %q, want it run once", b)
	}
}

// A step's command that comes to start once the worker's Procs is closed
// — the shutdown under way has killed the running groups and stopped the
// lifeline — is not started: nothing would stop it, and it would run on
// after the worker exits while another worker runs the step again. The
// refusal is not permanent: the step runs again where its deploy resumes.
func TestRunAfterCloseStartsNoCommand(t *testing.T) {
	dir := t.TempDir()
	procs := NewProcs(filepath.Join(dir, "procs"), 500*time.Millisecond)
	if err := procs.StartLifeline(nil); err != nil {
		t.Fatal(err)
	}
	procs.Kill()
	procs.Close()
	pidFile := filepath.Join(dir, "pid")
	cmd := exec.Command("sh", "-c", `echo $$ > "$PIDFILE.tmp" && mv "$PIDFILE.tmp" "$PIDFILE"; exec sleep 300`)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PIDFILE=" + pidFile}
	done := make(chan error, 1)
	go func() { done <- procs.Run(context.Background(), testContext(dir, &bytes.Buffer{}), cmd) }()
	var (
		err      error
		returned bool
	)
	waitUntil(30*time.Second, func() bool {
		if _, err := os.Stat(pidFile); err == nil {
			return true
		}
		select {
		case err = <-done:
			returned = true
			return true
		default:
			return false
		}
	})
	if b, rerr := os.ReadFile(pidFile); rerr == nil {
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pid > 1 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		<-done
		t.Fatalf("the command started after Close (process group %d): no Kill and no lifeline was left to stop it", pid)
	}
	if !returned {
		t.Fatal("Run neither started the command nor returned within 30 s")
	}
	if !errors.Is(err, ErrClosed) || IsPermanent(err) {
		t.Fatalf("Run after Close: %v, want ErrClosed, not permanent", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "procs")); len(entries) != 0 {
		t.Errorf("a record is left for a command that never started: %v", entries)
	}
}

// A lifeline that dies is started again, with the groups running then.
func TestLifelineRestarted(t *testing.T) {
	procs, pids, ran := runWithLifeline(t, `echo $$ > "$PIDS"; exec sleep 300`, 1)
	pgid := pids[0]
	procs.mu.Lock()
	first := procs.line
	procs.mu.Unlock()
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	var second *lifeline
	if !waitUntil(10*time.Second, func() bool {
		procs.mu.Lock()
		defer procs.mu.Unlock()
		second = procs.line
		return second != nil && second != first
	}) {
		t.Fatal("the lifeline was not started again")
	}
	if !groupAlive(pgid) {
		t.Fatal("the step died with the first lifeline")
	}
	second.w.Close() // now the worker dies
	if !waitUntil(15*time.Second, func() bool { return !groupAlive(pgid) }) {
		t.Fatalf("group %d still alive: the second lifeline did not know it", pgid)
	}
	<-ran
}

// A lifeline that stops reading (stopped, stuck) does not hold up the
// worker: a write to it that cannot go through within sendTimeout kills
// it, and another starts with the running groups.
func TestLifelineThatStopsReadingIsReplaced(t *testing.T) {
	procs := NewProcs(filepath.Join(t.TempDir(), "procs"), 500*time.Millisecond)
	if err := procs.StartLifeline(nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(procs.Close)
	procs.mu.Lock()
	first := procs.line
	procs.mu.Unlock()
	if err := first.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.cmd.Process.Kill() }) // stopped, it would never read its end of the pipe

	// More than a pipe holds: records of groups of another boot, which no
	// lifeline would ever signal.
	registered := make(chan struct{})
	go func() {
		defer close(registered)
		for i := 0; i < 2000; i++ {
			_ = procs.track(procRecord{Deploy: "dpl_x", Step: "s", PGID: 1_000_000 + i, Boot: "another-boot"}, true)
		}
	}()
	select {
	case <-registered:
	case <-time.After(30 * time.Second):
		t.Fatal("registering groups is held up by a lifeline that does not read")
	}
	if !waitUntil(10*time.Second, func() bool {
		procs.mu.Lock()
		defer procs.mu.Unlock()
		return procs.line != nil && procs.line != first
	}) {
		t.Fatal("the stopped lifeline was not replaced")
	}
	for i := 0; i < 2000; i++ {
		_ = procs.track(procRecord{PGID: 1_000_000 + i}, false)
	}
}
