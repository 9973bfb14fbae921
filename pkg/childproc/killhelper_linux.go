package childproc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// KillHelper shows that a child dies with the test binary that started
// it, however that dies. It runs the test binary again as a helper that
// runs only the test named test, with env added to its environment; the
// helper starts the child and calls HoldChild with its pid. KillHelper then
// kills the helper with SIGKILL — no cleanup runs, as on a CI timeout or
// kill -9 — and fails t unless the child is gone within 15 s. what names
// the child in failures ("etcd"); more, when set, is added to the failure
// of a helper that printed no pid (the child's log).
func KillHelper(t testing.TB, test string, env []string, what string, more func() string) {
	t.Helper()
	helper := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.timeout=2m")
	helper.Env = append(os.Environ(), env...)
	// Held open until the helper is killed: the helper holds its child
	// until its standard input ends (the test failing before the kill).
	stdin, err := helper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	pid := 0
	sc := bufio.NewScanner(stdout)
	for pid == 0 && sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		_, _ = fmt.Sscanf(sc.Text(), "child pid %d", &pid)
	}
	if pid == 0 {
		_ = helper.Process.Kill()
		_ = helper.Wait()
		extra := ""
		if more != nil {
			extra = "\n" + more()
		}
		t.Fatalf("the helper printed no pid of %s:\n%s%s", what, out.String(), extra)
	}
	t.Cleanup(func() {
		if Alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if !Alive(pid) {
		t.Fatalf("%s (pid %d) is not running before the helper is killed", what, pid)
	}
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs 15 s after the test binary that started it was killed", what, pid)
		}
		<-tick.C
	}
}

// HoldChild is the helper's part of KillHelper: it tells KillHelper the
// child's pid, then holds the child until its standard input ends.
func HoldChild(pid int) {
	fmt.Printf("child pid %d\n", pid)
	_, _ = io.Copy(io.Discard, os.Stdin)
}
