package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/childproc"
	"github.com/manent-io/manent/pkg/cli"
	"github.com/manent-io/manent/pkg/enginetest"
)

// childOf returns the pid of a live process whose parent is ppid and whose
// command line starts with name, or 0.
func childOf(ppid int, name string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(ppid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if argv0, _, _ := strings.Cut(string(cmdline), "\x00"); filepath.Base(argv0) == name {
			return pid
		}
	}
	return 0
}

// TestSiblingDiesWithManent: `manent agent` killed with SIGKILL (no chance
// to pass the signal on) takes its manent-agent with it. An orphaned agent
// went on reporting, unseen: the operator believed it stopped, and the
// next `manent agent` made two agents under one cluster name.
func TestSiblingDiesWithManent(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("manent-exec", "agent", "--server", "http://127.0.0.1:1", "--cluster", "c1",
		"--kubeconfig", kubeconfig, "--interval", "1s")
	cmd.Env = append(os.Environ(), "MANENT_TOKEN=x")
	// A file, not a pipe: an orphaned sibling would hold a pipe open and
	// cmd.Wait with it.
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(stderr.Name())
			t.Logf("manent agent stderr:\n%s", b)
		}
	})
	// manent itself dies with the test binary, however that dies (and
	// its manent-agent with it, as this test shows).
	p, err := childproc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var child int
	enginetest.Eventually(t, 30*time.Second, func() bool { child = childOf(cmd.Process.Pid, cli.AgentBinary); return child != 0 },
		"manent to start %s", cli.AgentBinary)
	t.Cleanup(func() {
		if childproc.Alive(child) {
			_ = syscall.Kill(child, syscall.SIGKILL)
		}
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.Wait()
	enginetest.Eventually(t, 15*time.Second, func() bool { return !childproc.Alive(child) },
		"%s (pid %d) to stop once manent was killed", cli.AgentBinary, child)
}
