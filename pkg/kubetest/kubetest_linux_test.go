package kubetest

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/childproc"
	"github.com/manent-io/manent/pkg/enginetest"
)

// helperDirEnv switches TestChildDiesWithTheTestBinary to its helper part
// in the test binary it runs: the directory to start etcd in.
const helperDirEnv = "MANENT_KUBETEST_HELPER_DIR"

// A test binary killed with SIGKILL (a CI timeout, kill -9) runs no
// cleanup: the etcd and kube-apiserver it started went on running, for
// an hour, holding their ports and directories. The kernel kills them
// with it now (childproc.Start, whose own test shows the child outlives
// the goroutine that started it). The test runs itself again as a helper
// that starts etcd, checks that it answers, and prints its pid; then
// kills the helper and waits for etcd to go.
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
		if childproc.Alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	enginetest.Eventually(t, 15*time.Second, func() bool { return !childproc.Alive(pid) },
		"etcd (pid %d) to stop once the test binary that started it was killed", pid)
}

// holdEtcd is the helper's part: etcd started in dir, answering, its pid
// printed; then it waits for its standard input to end.
func holdEtcd(t *testing.T, dir string) {
	binDir := BinDir(t)
	ports := freePorts(t, 2)
	url, _, pid := startEtcd(t, dir, binDir, ports[0], ports[1])
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	enginetest.Eventually(t, 60*time.Second, func() bool {
		if !childproc.Alive(pid) {
			t.Fatalf("etcd (pid %d) ended (its log: %s)", pid, filepath.Join(dir, "etcd.log"))
		}
		resp, err := hc.Get(url + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "etcd to answer on %s (its log: %s)", url, filepath.Join(dir, "etcd.log"))
	fmt.Printf("etcd pid %d\n", pid)
	_, _ = io.Copy(io.Discard, os.Stdin)
}
