package main_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// Anonymous clients that open connections and hold them idle cannot take
// the file descriptors a server needs for its own work: it holds at most
// limits.connections at once, kept below its open-file limit, and the
// rest wait in the kernel's queue. Here the server may open 256 files;
// 400 idle connections come while a deploy runs, and the deploy still runs
// its remaining steps — a script step (a process, its pipes), database
// writes — to SUCCESS. Without the bound, the connections took every
// descriptor and the step could not start.
func TestConnectionFloodLeavesDeploysRunning(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh to lower the server's open-file limit")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	db := enginetest.SQLite(t)
	cmd := exec.Command("sh", append([]string{"-c", `ulimit -n 256 && exec "$0" "$@"`, serverBin}, serveArgs(data, db)...)...)
	cmd.Env = append(os.Environ(), "MANENT_BOOTSTRAP_TOKEN=test-token", "MANENT_WORKERS_RETRY_BASE=20ms", "MANENT_EXECUTOR_ID=flood")
	p := startCmd(t, cmd, data)
	c := p.client()

	art := filepath.Join(dir, "app.txt")
	if err := os.WriteFile(art, []byte("release"), 0o644); err != nil {
		t.Fatal(err)
	}
	gate, done := filepath.Join(dir, "gate"), filepath.Join(dir, "done")
	wait := fmt.Sprintf(`i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done`, gate)
	yml := fmt.Sprintf(`apiVersion: manent/v1
application: flood
environment: test
version: "1"
artifact: {url: "file://%s"}
max_retries: 0
steps:
  - {name: gate, before: deploy, plugin: script, with: {command: [sh, -c, %q]}}
  - {name: after, after: activation, plugin: script, with: {command: [sh, -c, "touch %s"]}}
`, art, wait, done)
	res, err := c.Submit(context.Background(), []byte(yml), false)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 30*time.Second, func() bool {
		d, err := c.Deployment(context.Background(), res.ID)
		return err == nil && d.State == manent.StatePending
	}, "the deploy running")

	// 400 connections, each with one unauthenticated request answered,
	// then held idle. Those past the bound are not accepted: their dial
	// succeeds (the kernel's queue) and their answer never comes.
	host := strings.TrimPrefix(p.addr, "http://")
	var conns []net.Conn
	t.Cleanup(func() {
		for _, cn := range conns {
			cn.Close()
		}
	})
	for i := 0; i < 400; i++ {
		cn, err := net.DialTimeout("tcp", host, 2*time.Second)
		if err != nil {
			break // the kernel's queue is full
		}
		conns = append(conns, cn)
		fmt.Fprintf(cn, "GET /api/v1/deployments HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	answered := 0
	deadline := time.Now().Add(2 * time.Second)
	for _, cn := range conns {
		_ = cn.SetReadDeadline(deadline)
		if line, err := bufio.NewReader(cn).ReadString('\n'); err == nil && strings.Contains(line, "401") {
			answered++
		}
	}
	if answered == 0 || answered >= 256 {
		t.Fatalf("%d of %d connections answered, want some but fewer than the 256 files the server may open", answered, len(conns))
	}
	t.Logf("%d connections held, %d of them answered", len(conns), answered)

	// Under the flood, the deploy goes on: a process, its pipes, the
	// artifact, database writes.
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 60*time.Second, func() bool {
		_, err := os.Stat(done)
		return err == nil
	}, "the step after activation to run under the flood")
	for _, cn := range conns {
		cn.Close()
	}
	conns = nil
	d := waitFinal(t, c, res.ID)
	if d.State != manent.StateSuccess {
		logs, _ := os.ReadFile(filepath.Join(data, "server.log"))
		t.Fatalf("deploy %s (%s), want SUCCESS; server log:\n%s", d.State, d.Error, logs)
	}
	logs, _ := os.ReadFile(filepath.Join(data, "server.log"))
	if !strings.Contains(string(logs), "limits.connections lowered") {
		t.Errorf("the server did not say it lowered limits.connections to its open-file limit:\n%s", logs)
	}
}
