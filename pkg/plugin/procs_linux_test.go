package plugin

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// orphan starts `sh -c script` in its own process group, as the command
// of a worker that then died: the test does not wait for it until the end.
func orphan(t *testing.T, script string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	return cmd
}

// groupAlive says whether a process of group pgid is still running
// (zombies are not).
func groupAlive(pgid int) bool {
	for _, s := range readProcs() {
		if s.pgrp == pgid && !s.dead() {
			return true
		}
	}
	return false
}

func testContext(dir string, log *bytes.Buffer) Context {
	return Context{DeployID: "dpl_crash", Step: "smoke", WorkDir: dir, Log: log}
}

// A recovered step first stops the process group its previous attempt
// left running — the worker died, the group was recorded — and only then
// runs its command again.
func TestRunStopsThePreviousAttempt(t *testing.T) {
	dir := t.TempDir()
	procs := NewProcs(filepath.Join(dir, "procs"), time.Second)
	var log bytes.Buffer
	pc := testContext(dir, &log)
	old := orphan(t, "sleep 300 & sleep 300")
	pgid := old.Process.Pid
	if err := writeRecord(procs.recordPath(pc), procRecord{Deploy: pc.DeployID, Step: pc.Step, PGID: pgid, Start: startTime(pgid), Boot: bootID()}); err != nil {
		t.Fatal(err)
	}
	// The new attempt records whether any process of the old group was
	// still alive when it started.
	seen := filepath.Join(dir, "seen")
	probe := `for f in /proc/[0-9]*/stat; do read -r l < "$f" 2>/dev/null || continue; set -- ${l##*) }; [ "$3" = "` +
		strconv.Itoa(pgid) + `" ] && [ "$1" != Z ] && echo "alive ${f}"; done > ` + seen + `; true`
	cmd := exec.Command("sh", "-c", probe)
	if err := procs.Run(context.Background(), pc, cmd); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	if len(bytes.TrimSpace(b)) > 0 || groupAlive(pgid) {
		t.Fatalf("the new attempt ran while the previous one's group %d was alive:\n%s", pgid, b)
	}
	if !strings.Contains(log.String(), "previous attempt of step smoke is still running") {
		t.Fatalf("log %q: want a line saying the previous attempt was stopped", log.String())
	}
	if _, err := os.Stat(procs.recordPath(pc)); !os.IsNotExist(err) {
		t.Fatalf("the record of a finished step remains: %v", err)
	}
}

// A group id reused by another process (same pid, another start time) is
// not the recorded group: it is left alone.
func TestReusedGroupIDLeftAlone(t *testing.T) {
	dir := t.TempDir()
	procs := NewProcs(filepath.Join(dir, "procs"), time.Second)
	var log bytes.Buffer
	pc := testContext(dir, &log)
	other := orphan(t, "sleep 300")
	pgid := other.Process.Pid
	if err := writeRecord(procs.recordPath(pc), procRecord{Deploy: pc.DeployID, Step: pc.Step, PGID: pgid, Start: startTime(pgid) - 1, Boot: bootID()}); err != nil {
		t.Fatal(err)
	}
	if err := procs.Run(context.Background(), pc, exec.Command("true")); err != nil {
		t.Fatal(err)
	}
	if !groupAlive(pgid) {
		t.Fatalf("process group %d, which only reuses the recorded id, was killed", pgid)
	}
	// After a reboot every recorded group is gone.
	if err := writeRecord(procs.recordPath(pc), procRecord{Deploy: pc.DeployID, Step: pc.Step, PGID: pgid, Start: startTime(pgid), Boot: "another-boot"}); err != nil {
		t.Fatal(err)
	}
	if err := procs.Run(context.Background(), pc, exec.Command("true")); err != nil {
		t.Fatal(err)
	}
	if !groupAlive(pgid) {
		t.Fatalf("a group recorded before a reboot was taken for process group %d", pgid)
	}
}

// Sweep, when the worker starts, stops every recorded group — also one
// whose worker died between starting the command and recording its group,
// found by the step's MANENT_DEPLOY_ID and MANENT_STEP.
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	procs := NewProcs(filepath.Join(dir, "procs"), time.Second)
	a := testContext(dir, nil)
	b := a
	b.Step = "verify"
	recorded := orphan(t, "sleep 300 & sleep 300")
	unrecorded := orphan(t, "sleep 300 & sleep 300", "MANENT_DEPLOY_ID=dpl_crash", "MANENT_STEP=verify")
	bystander := orphan(t, "sleep 300", "MANENT_DEPLOY_ID=dpl_crash", "MANENT_STEP=smoke-2")
	pa := recorded.Process.Pid
	if err := writeRecord(procs.recordPath(a), procRecord{Deploy: a.DeployID, Step: a.Step, PGID: pa, Start: startTime(pa), Boot: bootID()}); err != nil {
		t.Fatal(err)
	}
	if err := writeRecord(procs.recordPath(b), procRecord{Deploy: b.DeployID, Step: b.Step, Boot: bootID()}); err != nil {
		t.Fatal(err)
	}
	stopped, err := procs.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(stopped) != 2 {
		t.Fatalf("Sweep stopped %v, want both steps", stopped)
	}
	if groupAlive(pa) || groupAlive(unrecorded.Process.Pid) {
		t.Fatal("a recorded group survived the sweep")
	}
	if !groupAlive(bystander.Process.Pid) {
		t.Fatal("the sweep killed a process of another step")
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "procs")); len(entries) != 0 {
		t.Fatalf("records left after the sweep: %v", entries)
	}
}

// gatedWriter takes nothing until open is closed: a step's log that is
// slow to write (to the database, under load).
type gatedWriter struct {
	open chan struct{}
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	<-w.open
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// What a command wrote before it ended is kept whole, however long the
// step's log takes it: the copy of its output is not cut once the grace
// period has passed since the command ended while it still writes what
// it read (under load the log lost the last lines of a step that printed
// 20,000).
func TestSlowLogKeepsTheWholeOutput(t *testing.T) {
	dir := t.TempDir()
	ended := filepath.Join(dir, "ended")
	const grace = 50 * time.Millisecond
	w := &gatedWriter{open: make(chan struct{})}
	// 10,000 lines (48 KB) fit in the pipe, not in one read of its copy:
	// the command ends at once, and most of its output waits in the pipe.
	cmd := exec.Command("sh", "-c", `seq 1 10000; echo $$ > `+ended+`.tmp; mv `+ended+`.tmp `+ended)
	cmd.Stdout = w
	var log bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- NewProcs("", grace).Run(context.Background(), testContext(dir, &log), cmd) }()
	var pid int
	deadline := time.Now().Add(20 * time.Second)
	for pid == 0 || syscall.Kill(pid, 0) == nil { // until it ended and Run reaped it
		if time.Now().After(deadline) {
			t.Fatal("the command did not end")
		}
		if b, err := os.ReadFile(ended); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		<-time.After(5 * time.Millisecond)
	}
	// The log stays blocked for many grace periods after the command
	// ended (what the test is about, not a synchronisation).
	<-time.After(20 * grace)
	close(w.open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(w.buf.String(), "\n"); lines != 10000 || !strings.HasSuffix(w.buf.String(), "\n10000\n") {
		t.Errorf("kept %d lines of 10000 (ends %q)", lines, w.buf.String()[max(0, w.buf.Len()-20):])
	}
	if strings.Contains(log.String(), "still held") {
		t.Errorf("log: %q", log.String())
	}
}
