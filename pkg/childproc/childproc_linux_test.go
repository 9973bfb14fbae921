package childproc_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/childproc"
	"github.com/manent-io/manent/pkg/enginetest"
)

// helperEnv switches TestChildDiesWithTheTestBinary to its helper part in
// the test binary it runs.
const helperEnv = "MANENT_CHILDPROC_HELPER"

// A child started with Start outlives the goroutine (and the OS thread)
// that asked for it, and dies with the test binary when that is killed
// with SIGKILL (a CI timeout, kill -9), which runs no cleanup. The test
// runs itself again as a helper that starts `sleep` from a goroutine that
// holds its OS thread and then ends (ending the thread, which fires the
// parent-death signal of the children that thread started), checks that
// sleep still runs once that thread is gone, and prints its pid; then
// kills the helper and waits for sleep to go.
func TestChildDiesWithTheTestBinary(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		holdSleep(t)
		return
	}
	childproc.KillHelper(t, "TestChildDiesWithTheTestBinary", []string{helperEnv + "=1"}, "the child", nil)
}

// holdSleep is the helper's part: sleep started by a goroutine that holds
// its thread and ends, the thread gone, sleep still running, its pid
// printed; then it waits for its standard input to end.
func holdSleep(t *testing.T) {
	type result struct {
		p   *childproc.Process
		err error
		tid int
	}
	started := make(chan result, 1)
	offMainThread(t, func() {
		// Not unlocked: the thread ends with the goroutine.
		p, err := childproc.Start(exec.Command("sleep", "300"))
		started <- result{p: p, err: err, tid: syscall.Gettid()}
	})
	r := <-started
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { _ = r.p.Cmd.Process.Kill(); _ = r.p.Wait() })
	pid := r.p.Cmd.Process.Pid
	task := fmt.Sprintf("/proc/self/task/%d", r.tid)
	enginetest.Eventually(t, 15*time.Second, func() bool { _, err := os.Stat(task); return os.IsNotExist(err) },
		"the thread (%d) of the goroutine that started the child to end", r.tid)
	select {
	case <-r.p.Done():
		t.Fatalf("the child (pid %d) ended with the thread of the goroutine that started it: %v", pid, r.p.Err())
	default:
	}
	// The thread's end would have sent the signal already: the child
	// would be gone, or its SIGKILL pending.
	if !childproc.Alive(pid) || killPending(t, pid) {
		t.Fatalf("the child (pid %d) ended with the thread of the goroutine that started it", pid)
	}
	childproc.HoldChild(pid)
}

// killPending says whether pid has a SIGKILL pending, sent and not yet
// acted on.
func killPending(t *testing.T, pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return true // gone meanwhile
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, mask, ok := strings.Cut(line, ":")
		if !ok || (name != "SigPnd" && name != "ShdPnd") {
			continue
		}
		m, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64)
		if err != nil {
			t.Fatalf("%s of pid %d: %v", name, pid, err)
		}
		if m&(1<<(syscall.SIGKILL-1)) != 0 {
			return true
		}
	}
	return false
}

// offMainThread runs fn in a new goroutine locked to a thread other than
// the process's main thread, which does not end with a goroutine locked to
// it (the runtime keeps it, wedged): the goroutine that lands on the main
// thread keeps it until t ends, and tries again in another.
func offMainThread(t *testing.T, fn func()) {
	go func() {
		runtime.LockOSThread()
		if syscall.Gettid() == os.Getpid() {
			hold := make(chan struct{})
			t.Cleanup(func() { close(hold) })
			offMainThread(t, fn)
			<-hold
			runtime.UnlockOSThread()
			return
		}
		fn()
	}()
}
