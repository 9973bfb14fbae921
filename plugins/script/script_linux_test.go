package script_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/script"
)

func pctx(t *testing.T, log *enginetest.SyncBuffer, with map[string]any) plugin.Context {
	dir := t.TempDir()
	return plugin.Context{DeployID: "dpl_test", Application: "billing", Environment: "prod", Version: "1.2",
		Step: "smoke", WorkDir: dir, Artifact: filepath.Join(dir, "app.tgz"), With: with, Log: log}
}

func command(args ...string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
	}
	return out
}

// alive says whether pid is a running process (a zombie is not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// waitFile waits until path holds a pid, and returns it.
func waitFile(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s was not written", path)
	return 0
}

// killed kills pid at the end of a test that failed to.
func killed(t *testing.T, pid int) {
	t.Cleanup(func() {
		if p, err := os.FindProcess(pid); err == nil && alive(pid) {
			_ = p.Kill()
		}
	})
}

// A step's command starts from an empty environment (SPEC §11.1): the
// server's PATH, HOME, LANG and TZ, the MANENT_* contract variables, the
// variables of plugins.pass_env, then with.env — nothing else, whatever
// secrets the server's environment holds.
func TestEnvironmentStartsEmpty(t *testing.T) {
	t.Setenv("MANENT_BOOTSTRAP_TOKEN", "admin-secret-1")
	t.Setenv("MANENT_CALLBACK_SECRET", "whsec_c2VjcmV0")
	t.Setenv("ITSM_TOKEN", "itsm-secret-2")
	t.Setenv("DATABASE_URL", "postgres://u:dsn-secret-3@db/manent")
	t.Setenv("PASSED", "from-server")
	t.Setenv("OVERRIDDEN", "from-server")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("TZ", "Europe/Paris")
	var log enginetest.SyncBuffer
	p := script.New(script.Options{PassEnv: []string{"PASSED", "OVERRIDDEN", "UNSET_VAR"}})
	pc := pctx(t, &log, map[string]any{
		// The shell's own environment as it was given to it.
		"command": command("sh", "-c", `tr '\0' '\n' < /proc/$$/environ`),
		"env":     map[string]any{"OVERRIDDEN": "from-with", "REPLICAS": 3},
	})
	if _, err := p.Run(context.Background(), pc); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	want := map[string]string{
		"PATH": os.Getenv("PATH"), "LANG": "C.UTF-8", "TZ": "Europe/Paris",
		"MANENT_DEPLOY_ID": "dpl_test", "MANENT_APPLICATION": "billing", "MANENT_ENVIRONMENT": "prod",
		"MANENT_VERSION": "1.2", "MANENT_STEP": "smoke", "MANENT_ARTIFACT": pc.Artifact, "MANENT_WORKDIR": pc.WorkDir,
		"PASSED": "from-server", "OVERRIDDEN": "from-with", "REPLICAS": "3",
	}
	if h, ok := os.LookupEnv("HOME"); ok {
		want["HOME"] = h
	}
	if gk, wk := keys(got), keys(want); gk != wk {
		t.Fatalf("the command's environment has\n %s\nwant\n %s", gk, wk)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}
	for _, secret := range []string{"admin-secret-1", "c2VjcmV0", "itsm-secret-2", "dsn-secret-3"} {
		if strings.Contains(log.String(), secret) {
			t.Errorf("the step saw the server secret %q", secret)
		}
	}
}

func keys(m map[string]string) string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func TestWithEnvChecked(t *testing.T) {
	p := script.New(script.Options{})
	for _, env := range []any{"A=1", map[string]any{"A=B": "1"}, map[string]any{"A": []any{1}}, map[string]any{"A": "x\x00y"}} {
		if err := p.Validate(map[string]any{"command": command("true"), "env": env}); err == nil {
			t.Errorf("with.env %#v accepted", env)
		}
	}
}

// A cancelled step (cancel, worker shutdown) kills the whole process group
// of its command, not only the command: nothing it started survives.
func TestCancelKillsTheGroup(t *testing.T) {
	var log enginetest.SyncBuffer
	bg := filepath.Join(t.TempDir(), "bg")
	p := script.New(script.Options{})
	pc := pctx(t, &log, map[string]any{"command": command("sh", "-c", `sleep 300 & echo $! > `+bg+`; wait`)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := p.Run(ctx, pc); done <- err }()
	pid := waitFile(t, bg)
	killed(t, pid)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled command succeeded")
	}
	if alive(pid) {
		t.Fatalf("the command's child %d survived the cancelled step", pid)
	}
}

// A step that times out is killed with its whole process group.
func TestTimeoutKillsTheGroup(t *testing.T) {
	var log enginetest.SyncBuffer
	bg := filepath.Join(t.TempDir(), "bg")
	p := script.New(script.Options{})
	pc := pctx(t, &log, map[string]any{"timeout": "300ms",
		"command": command("sh", "-c", `sleep 300 & echo $! > `+bg+`; wait`)})
	_, err := p.Run(context.Background(), pc)
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("got %v, want a timeout", err)
	}
	pid := waitFile(t, bg)
	killed(t, pid)
	if alive(pid) {
		t.Fatalf("the command's child %d survived the timeout", pid)
	}
}

// A step's processes do not outlive it: what the command left running in
// its group when it exited is killed.
func TestLeftoversKilled(t *testing.T) {
	var log enginetest.SyncBuffer
	bg := filepath.Join(t.TempDir(), "bg")
	p := script.New(script.Options{})
	pc := pctx(t, &log, map[string]any{"command": command("sh", "-c", `sleep 300 >/dev/null 2>&1 & echo $! > `+bg)})
	if _, err := p.Run(context.Background(), pc); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	pid := waitFile(t, bg)
	killed(t, pid)
	if alive(pid) {
		t.Fatalf("the command's child %d outlived the step", pid)
	}
}

// A command killed by a signal (by someone else than manent: the OOM killer,
// an operator) says so and names the signal, not "exited with status -1".
func TestKilledBySignalSaysSo(t *testing.T) {
	var log enginetest.SyncBuffer
	p := script.New(script.Options{})
	pc := pctx(t, &log, map[string]any{"command": command("sh", "-c", `kill -KILL $$`)})
	_, err := p.Run(context.Background(), pc)
	if err == nil || !strings.Contains(err.Error(), "script sh was killed (signal: killed)") {
		t.Fatalf("got %v, want the signal named", err)
	}
}

// A command that succeeds but leaves a child holding its output (`sleep &`
// without a redirection) succeeds at once: the child is killed with the
// step, and the step's output is kept — not "WaitDelay expired" after 5 s.
func TestLeftoverHoldingTheOutputKilled(t *testing.T) {
	var log enginetest.SyncBuffer
	bg := filepath.Join(t.TempDir(), "bg")
	p := script.New(script.Options{})
	pc := pctx(t, &log, map[string]any{"command": command("sh", "-c", `sleep 300 & echo $! > `+bg+`; echo started`)})
	res, err := p.Run(context.Background(), pc)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	pid := waitFile(t, bg)
	killed(t, pid)
	if alive(pid) {
		t.Fatalf("the command's child %d outlived the step", pid)
	}
	if res["exit_code"] != 0 || !strings.Contains(log.String(), "started") {
		t.Fatalf("result %v, log %q", res, log.String())
	}
}

// A process that left the step's process group (setsid) is out of manent's
// reach; if it holds the command's output, the step still ends — once the
// grace period has passed, reading stops and the log says why.
func TestEscapedProcessHoldingTheOutput(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid here")
	}
	var log enginetest.SyncBuffer
	bg := filepath.Join(t.TempDir(), "bg")
	p := script.New(script.Options{Procs: plugin.NewProcs("", 100*time.Millisecond)})
	pc := pctx(t, &log, map[string]any{"command": command("sh", "-c",
		// The pid is written once the process has left the group.
		`setsid sh -c 'echo $$ > `+bg+`.tmp; mv `+bg+`.tmp `+bg+`; exec sleep 300' & while [ ! -e `+bg+` ]; do sleep 0.01; done; echo started`)})
	res, err := p.Run(context.Background(), pc)
	pid := waitFile(t, bg)
	killed(t, pid)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if res["exit_code"] != 0 || !strings.Contains(log.String(), "started") ||
		!strings.Contains(log.String(), "a process that left the step's process group still held the command's output") {
		t.Fatalf("result %v, log %q", res, log.String())
	}
}
