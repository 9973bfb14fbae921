package external_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/external"
)

// waitFor waits until cond holds, failing the test past within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not a synchronisation
	}
}

// A submission whose client leaves ends the validate it waits for at
// once (its process group stopped) and frees its slot: a hung plugin's
// validate no longer holds one of the MaxValidations slots until its
// timeout after nobody waits for it.
func TestCancelledValidateFreesItsSlot(t *testing.T) {
	dir := t.TempDir()
	running := filepath.Join(dir, "running")
	if err := os.Mkdir(running, 0o755); err != nil {
		t.Fatal(err)
	}
	// Hangs unless its settings ask for an answer.
	path := writeScript(t, dir, "manent-plugin-hung", "req=$(cat)\ncase \"$req\" in *answer*) echo '{\"ok\": true}'; exit 0;; esac\ntouch "+running+"/$$\nexec sleep 120\n", 0o755)
	p := &external.Plugin{Name: "hung", Path: path, ValidateTimeout: 2 * time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, external.MaxValidations)
	var wg sync.WaitGroup
	for range external.MaxValidations {
		wg.Go(func() { errs <- p.ValidateContext(ctx, map[string]any{}) })
	}
	waitFor(t, time.Minute, "the hung validate processes did not all start", func() bool {
		entries, _ := os.ReadDir(running)
		return len(entries) == external.MaxValidations
	})
	cancel()
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("cancelled validates still running 30s after their context ended (their timeout is 2m)")
	}
	close(errs)
	for err := range errs {
		if plugin.AsUndecided(err) == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stopped before it answered") {
			t.Errorf("cancelled validate: %v, want no verdict saying it was stopped", err)
		}
	}
	// Every slot is free: a validate that answers gets one at once.
	if err := p.Validate(map[string]any{"answer": true}); err != nil {
		t.Fatalf("validate after the cancelled ones: %v", err)
	}
	// And the cancelled ones' processes are gone.
	entries, _ := os.ReadDir(running)
	for _, e := range entries {
		pid, _ := strconv.Atoi(e.Name())
		waitFor(t, 30*time.Second, "a cancelled validate's process "+e.Name()+" still runs", func() bool { return !alive(pid) })
	}
}

// alive says whether pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// A validate that answers but leaves a process outside its process group
// (setsid) holding its stdout answers within the validate timeout — the
// copy of its output is not read on for up to a minute while the
// submission and a validate slot wait — and is no verdict (a 503 saying
// what the plugin must not do). Real processes: the child is still alive
// when the validate returns.
func TestValidateOutputHeldBySetsidChild(t *testing.T) {
	for _, tc := range []struct{ name, child string }{
		{"silent", "exec sleep 30"},
		// Ignores SIGPIPE so that it outlives the end of the read.
		{"writing", "trap '' PIPE; i=0; while [ $i -lt 150 ]; do echo .; sleep 0.2; i=$((i+1)); done"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "child.pid")
			path := writeScript(t, dir, "manent-plugin-leaky", "echo '{\"ok\": true}'\nsetsid sh -c 'echo $$ > "+pidFile+"; "+tc.child+"' &\n# Ends once the child has left its group (else killed with it).\nwhile [ ! -s "+pidFile+" ]; do sleep 0.05; done\nexit 0\n", 0o755)
			// The Procs' grace above the validate timeout: a silent
			// child is not cut as idle first.
			p := &external.Plugin{Name: "leaky", Path: path, ValidateTimeout: time.Second, Procs: plugin.NewProcs("", time.Minute)}
			err := p.Validate(map[string]any{})
			var pid int
			waitFor(t, 30*time.Second, "the setsid child wrote no pid", func() bool {
				b, _ := os.ReadFile(pidFile)
				pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				return pid > 0
			})
			stillRunning := alive(pid)
			// The child left the plugin's group: this test stops it.
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			if !stillRunning {
				t.Errorf("the validate returned only once the child holding its stdout had ended (%v)", err)
			}
			if plugin.AsUndecided(err) == nil || !errors.Is(err, plugin.ErrOutputHeld) || !strings.Contains(err.Error(), "within 1s") || !strings.Contains(err.Error(), "must not leave processes holding its stdout") {
				t.Errorf("validate: %v, want no verdict naming the bound and what the plugin must not do", err)
			}
		})
	}
}
