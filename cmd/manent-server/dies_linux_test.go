package main_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/manent-io/manent/pkg/childproc"
)

// helperDataEnv switches TestServerDiesWithTheTestBinary to its helper
// part in the test binary it runs: the data directory of its server.
const helperDataEnv = "MANENT_TEST_DIES_HELPER_DATA"

// A test binary killed with SIGKILL (a CI timeout, kill -9) runs no
// cleanup: the manent-server processes it had started went on running,
// holding their ports, files and PostgreSQL connections. The kernel kills
// them with it now (launchCmd, through childproc.Start). The test runs
// itself again as a helper that starts a server as the tests do (start),
// waits until it listens and prints its pid; then kills the helper and
// waits for the server to go.
func TestServerDiesWithTheTestBinary(t *testing.T) {
	if data := os.Getenv(helperDataEnv); data != "" {
		p := start(t, data, "sqlite:"+filepath.Join(data, "manent.db"))
		childproc.HoldChild(p.cmd.Process.Pid)
		return
	}
	data := t.TempDir()
	childproc.KillHelper(t, "TestServerDiesWithTheTestBinary", []string{helperDataEnv + "=" + data, serverBinEnv + "=" + serverBin}, "manent-server",
		func() string {
			b, _ := os.ReadFile(filepath.Join(data, "server.log"))
			return "server.log:\n" + string(b)
		})
}
