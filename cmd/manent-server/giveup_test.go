package main_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// A deploy whose worker keeps dying in a step placed after activation is
// given up (MAX_RECOVERY_ATTEMPTS_EXCEEDED) and concluded like an ERROR
// (SPEC §11.2): rollback enabled → compensated, so the live release is the
// previous one again and the inventory says so; no step is left RUNNING;
// the `finished` callback is sent once; the deploy waiting on it is woken
// at once (DEPENDENCY_FAILED) and announced too.
func TestGivenUpDeployIsConcluded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	db := enginetest.SQLite(t)

	var mu sync.Mutex
	finished := map[string]map[string]int{} // deploy → state → count, by distinct webhook-id
	seen := map[string]bool{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev struct {
			Type       string `json:"type"`
			Deployment struct {
				ID, State string
			} `json:"deployment"`
		}
		_ = json.Unmarshal(b, &ev)
		mu.Lock()
		defer mu.Unlock()
		if ev.Type == "finished" && !seen[r.Header.Get("webhook-id")] {
			seen[r.Header.Get("webhook-id")] = true
			if finished[ev.Deployment.ID] == nil {
				finished[ev.Deployment.ID] = map[string]int{}
			}
			finished[ev.Deployment.ID][ev.Deployment.State]++
		}
	}))
	defer recv.Close()
	cfgPath := filepath.Join(dir, "manent-server.yaml")
	cfg := (`artifacts: {sources: ["file:///**"]}
callbacks: {allow: ["http://127.0.0.1:*/**"], secret_env: TEST_SECRET}
plugins: {steps: [script]}
workers: {max_recovery_attempts: 1}
`)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"MANENT_EXECUTOR_ID=giveup-worker", "TEST_SECRET=whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))}
	startCfg := func() *proc {
		return startConfigured(t, cfgPath, data, db, env...)
	}
	art := filepath.Join(dir, "app.txt")
	if err := os.WriteFile(art, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	started := filepath.Join(dir, "started")
	target := filepath.Join(data, "targets", "giveup", "prod")
	desc := func(version, extra string) []byte {
		return []byte(fmt.Sprintf(`apiVersion: manent/v1
application: giveup
environment: prod
version: %q
artifact: {url: "file://%s"}
target: {plugin: local, with: {dir: %q}}
rollback: {enabled: true}
callbacks: [{url: "%s/hook", events: [finished]}]
%s`, version, art, target, recv.URL, extra))
	}
	p := startCfg()
	ctx := context.Background()
	v1, err := p.client().Submit(ctx, desc("1", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	if d := waitFinal(t, p.client(), v1.ID); d.State != manent.StateSuccess {
		t.Fatalf("v1: %s %s", d.State, d.Error)
	}
	hang := fmt.Sprintf(`touch %s; i=0; while [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done`, started)
	v2, err := p.client().Submit(ctx, desc("2", fmt.Sprintf("steps:\n  - {name: warm-up, after: activation, plugin: script, with: {command: [sh, -c, %q]}}\n", hang)), false)
	if err != nil {
		t.Fatal(err)
	}
	v3, err := p.client().Submit(ctx, desc("3", fmt.Sprintf("after: [%s]\n", v2.ID)), false)
	if err != nil {
		t.Fatal(err)
	}
	// Kill the worker in warm-up until the deploy gives up: twice with
	// max_recovery_attempts 1.
	for crash := 0; crash < 2; crash++ {
		enginetest.Eventually(t, 60*time.Second, func() bool { _, err := os.Stat(started); return err == nil }, "warm-up to start (run %d)", crash+1)
		_ = os.Remove(started)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.done
		p = startCfg()
	}
	d := waitFinal(t, p.client(), v2.ID)
	if d.State != manent.StateMaxRecoveryAttemptsExceeded {
		b, _ := os.ReadFile(filepath.Join(data, "server.log"))
		t.Logf("server log:\n%s", tail(b))
		for _, s := range d.Steps {
			t.Logf("step %s %s attempts %d %s", s.Name, s.State, s.Attempts, s.Error)
		}
	}
	if d.State != manent.StateMaxRecoveryAttemptsExceeded || d.Rollback != manent.RollbackCompleted {
		t.Fatalf("v2 ended %s rollback %q (%s): want MAX_RECOVERY_ATTEMPTS_EXCEEDED with rollback completed", d.State, d.Rollback, d.Error)
	}
	for _, s := range d.Steps {
		if s.State == manent.StepRunning {
			t.Errorf("step %s left RUNNING", s.Name)
		}
	}
	if s := stepByName(d, "warm-up"); s.State != manent.StepError {
		t.Errorf("warm-up %s, want ERROR (the step it gave up in)", s.State)
	}
	// Its log says what happened at each start: resumed once, then given
	// up — not "resumption 2 of at most 1" of a step that did not run.
	logs, err := p.client().Logs(ctx, v2.ID)
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, l := range logs.Lines {
		if l.Step == "warm-up" && (strings.Contains(l.Text, "resum") || strings.Contains(l.Text, "given up") || strings.Contains(l.Text, "gives up")) {
			said = append(said, l.Text)
		}
	}
	if len(said) != 2 || !strings.Contains(said[0], "step resumed on giveup-worker after its worker stopped (resumption 1 of at most 1)") ||
		strings.Contains(said[1], "resumed on") || !strings.Contains(said[1], "MAX_RECOVERY_ATTEMPTS_EXCEEDED") {
		t.Errorf("warm-up's log about its resumptions: %q; want one resumption, then the deploy given up", said)
	}
	if cur, err := os.Readlink(filepath.Join(target, "current")); err != nil || filepath.Base(cur) != "1" {
		t.Fatalf("current -> %q (%v): want release 1 live again", cur, err)
	}
	inv, err := p.client().Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Items) != 1 || inv.Items[0].Current == nil || inv.Items[0].Current.Version != "1" ||
		inv.Items[0].LastFailure == nil || inv.Items[0].LastFailure.DeploymentID != v2.ID {
		t.Fatalf("inventory %+v: want current 1 and last failure %s", inv.Items, v2.ID)
	}
	if d3 := waitFinal(t, p.client(), v3.ID); d3.State != manent.StateDependencyFailed {
		t.Fatalf("v3 ended %s, want DEPENDENCY_FAILED", d3.State)
	}
	enginetest.Eventually(t, 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return finished[v2.ID][string(manent.StateMaxRecoveryAttemptsExceeded)] == 1 &&
			finished[v3.ID][string(manent.StateDependencyFailed)] == 1
	}, "the finished callbacks of v2 and v3")
	mu.Lock()
	defer mu.Unlock()
	for id, states := range finished {
		n := 0
		for _, c := range states {
			n += c
		}
		if n != 1 {
			t.Errorf("deploy %s announced %v: want exactly one finished event", id, states)
		}
	}
}

// startConfigured runs manent-server with a configuration file.
func startConfigured(t *testing.T, cfgPath, dataDir, db string, env ...string) *proc {
	t.Helper()
	return startArgs(t, []string{"--config", cfgPath}, dataDir, db, env...)
}

func tail(b []byte) string {
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return string(b)
}
