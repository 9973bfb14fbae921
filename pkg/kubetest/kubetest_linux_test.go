package kubetest

import (
	"net/http"
	"os"
	"path/filepath"
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
	childproc.KillHelper(t, "TestChildDiesWithTheTestBinary", []string{helperDirEnv + "=" + dir}, "etcd",
		func() string { b, _ := os.ReadFile(filepath.Join(dir, "etcd.log")); return "etcd.log:\n" + string(b) })
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
	childproc.HoldChild(pid)
}
