package kubetest

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
)

// helperDirEnv switches TestChildDiesWithTheTestBinary to its helper part
// in the test binary it runs: the directory to start etcd in.
const helperDirEnv = "MANENT_KUBETEST_HELPER_DIR"

// running says whether pid is a live process (not gone, not a zombie).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// A test binary killed with SIGKILL (a CI timeout, kill -9) runs no
// cleanup: the etcd and kube-apiserver it started went on running, for
// an hour, holding their ports and directories. The kernel kills them
// with it now. The test runs itself again as a helper that starts etcd
// from a goroutine that holds its OS thread and then ends (ending the
// thread, which fires the parent-death signal of the children that
// thread started), checks that etcd still answers, and prints its pid;
// then kills the helper and waits for etcd to go.
func TestChildDiesWithTheTestBinary(t *testing.T) {
	if dir := os.Getenv(helperDirEnv); dir != "" {
		holdEtcd(t, dir)
		return
	}
	BinDir(t)
	dir := t.TempDir()
	helper := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithTheTestBinary$", "-test.timeout=2m")
	helper.Env = append(os.Environ(), helperDirEnv+"="+dir)
	// Held open until the helper is killed: the helper holds etcd until
	// its standard input ends (the test failing before the kill).
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
		_, _ = fmt.Sscanf(sc.Text(), "etcd pid %d", &pid)
	}
	if pid == 0 {
		_ = helper.Process.Kill()
		_ = helper.Wait()
		t.Fatalf("the helper printed no etcd pid:\n%s", out.String())
	}
	t.Cleanup(func() {
		if running(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	enginetest.Eventually(t, 15*time.Second, func() bool { return !running(pid) },
		"etcd (pid %d) to stop once the test binary that started it was killed", pid)
}

// holdEtcd is the helper's part: etcd started in dir by a goroutine that
// holds its thread and ends, etcd answering, its pid printed; then it
// waits for its standard input to end.
func holdEtcd(t *testing.T, dir string) {
	binDir := BinDir(t)
	ports := freePorts(t, 2)
	type result struct {
		url string
		pid int
	}
	started := make(chan result)
	offMainThread(t, func() {
		// Not unlocked: the thread ends with the goroutine.
		url, _, pid := startEtcd(t, dir, binDir, ports[0], ports[1])
		started <- result{url, pid}
	})
	etcd := <-started
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	enginetest.Eventually(t, 60*time.Second, func() bool {
		if !running(etcd.pid) {
			t.Fatalf("etcd (pid %d) ended with the thread of the goroutine that started it", etcd.pid)
		}
		resp, err := hc.Get(etcd.url + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "etcd to answer on %s (its log: %s)", etcd.url, filepath.Join(dir, "etcd.log"))
	if !running(etcd.pid) {
		t.Fatalf("etcd (pid %d) ended with the thread of the goroutine that started it", etcd.pid)
	}
	fmt.Printf("etcd pid %d\n", etcd.pid)
	_, _ = io.Copy(io.Discard, os.Stdin)
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
