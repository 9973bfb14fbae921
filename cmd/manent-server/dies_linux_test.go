package main_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
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
		fmt.Printf("server pid %d\n", p.cmd.Process.Pid)
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	}
	data := t.TempDir()
	helper := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTheTestBinary$", "-test.timeout=2m")
	helper.Env = append(os.Environ(), helperDataEnv+"="+data, serverBinEnv+"="+serverBin)
	// Held open until the helper is killed: the helper holds its server
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
		_, _ = fmt.Sscanf(sc.Text(), "server pid %d", &pid)
	}
	if pid == 0 {
		_ = helper.Process.Kill()
		_ = helper.Wait()
		b, _ := os.ReadFile(filepath.Join(data, "server.log"))
		t.Fatalf("the helper printed no server pid:\n%s\nserver.log:\n%s", out.String(), b)
	}
	t.Cleanup(func() {
		if alivePid(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if !alivePid(pid) {
		t.Fatalf("the server (pid %d) is not running before the helper is killed", pid)
	}
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	enginetest.Eventually(t, 15*time.Second, func() bool { return !alivePid(pid) },
		"manent-server (pid %d) to stop once the test binary that started it was killed", pid)
}
