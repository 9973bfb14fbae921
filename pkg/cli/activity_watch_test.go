package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/cli"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/servertest"
)

// watching runs `manent activity --watch args...` against srv until stop
// is called, which cancels it (as Ctrl-C does) and returns its exit code.
func watching(t *testing.T, srv *servertest.Server, args ...string) (out, errOut *enginetest.SyncBuffer, stop func() int) {
	t.Helper()
	out, errOut = &enginetest.SyncBuffer{}, &enginetest.SyncBuffer{}
	env := map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token}
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() {
		code <- cli.Run(ctx, cli.Invocation{
			Args: append([]string{"activity", "--watch"}, args...), Stdout: out, Stderr: errOut,
			Getenv: func(k string) string { return env[k] }, PollInterval: 20 * time.Millisecond,
		})
	}()
	stopped := false
	stop = func() int {
		if stopped {
			return -1
		}
		stopped = true
		cancel()
		select {
		case c := <-code:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("activity --watch did not end within 10s of its context being cancelled")
			return -1
		}
	}
	t.Cleanup(func() { stop() })
	return out, errOut, stop
}

// waitOutput waits (at most 15 s) until out matches re.
func waitOutput(t *testing.T, out *enginetest.SyncBuffer, re string) {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(15 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !rx.MatchString(out.String()) {
		select {
		case <-deadline:
			t.Fatalf("no output matching %s after 15s; output:\n%s", re, out.String())
		case <-tick.C:
		}
	}
}

// gatedDescriptor writes a descriptor whose step runs until the file gate
// exists.
func gatedDescriptor(t *testing.T, version, gate string) string {
	t.Helper()
	p := writeDescriptor(t, version)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, fmt.Sprintf("steps:\n  - name: work\n    before: activation\n    plugin: script\n    with:\n"+
		"      command: [\"sh\", \"-c\", \"while [ ! -f %s ]; do sleep 0.02; done\"]\n", gate)...)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// `activity --watch` prints the activity, then a row for a deploy
// submitted afterwards as it runs and when it ends. The refresh interval
// is a minute, so the rows come from the server's event stream (which, on
// connecting, names the deploys that run). Cancelling (Ctrl-C) ends it
// with exit 0.
func TestActivityWatch(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	env := map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token}
	out, errOut, stop := watching(t, srv, "--interval", "1m")
	waitOutput(t, errOut, `(?m)^nothing is running or waiting; watching \(Ctrl-C to stop\)$`)
	waitOutput(t, out, `^ENVIRONMENT +ID +APPLICATION +VERSION +STATE +AGE +WHY\n$`)

	gate := filepath.Join(t.TempDir(), "gate")
	code, stdout, stderr := runCLI(t, env, "deploy", "-f", gatedDescriptor(t, "1.0.0", gate), "--jq", ".id")
	if code != 0 {
		t.Fatalf("deploy: exit %d\n%s", code, stderr)
	}
	id := strings.TrimSpace(stdout)
	waitOutput(t, out, `(?m)^prod +`+id+` +billing +1\.0\.0 +PENDING +(just now|\d+s ago) +running step work$`)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, out, `(?m)^prod +`+id+` +billing +1\.0\.0 +SUCCESS +(just now|\d+s ago) +finished$`)
	if c := stop(); c != 0 {
		t.Fatalf("exit %d after cancel, want 0; stderr:\n%s", c, errOut.String())
	}
	if got := strings.Count(out.String(), id+" "); got < 1 {
		t.Fatalf("the deploy has %d rows:\n%s", got, out.String())
	}
	if strings.Contains(errOut.String(), "Error") {
		t.Errorf("stderr: %s", errOut.String())
	}
}

// With --jq the watch prints one filtered activity item per line: the
// deploys active at the start (here one running), then each change.
func TestActivityWatchJQ(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	env := map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token}
	gate := filepath.Join(t.TempDir(), "gate")
	code, stdout, stderr := runCLI(t, env, "deploy", "-f", gatedDescriptor(t, "2.0.0", gate), "--jq", ".id")
	if code != 0 {
		t.Fatalf("deploy: exit %d\n%s", code, stderr)
	}
	id := strings.TrimSpace(stdout)
	waitFor(t, "the deploy runs its step", func() bool {
		d, err := srv.Client().Deployment(context.Background(), id)
		return err == nil && d.State == "PENDING"
	})
	out, errOut, stop := watching(t, srv, "--interval", "200ms", "--jq", `.id + " " + .state + " " + .environment`)
	waitOutput(t, out, `(?m)^`+id+` PENDING prod$`)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, out, `(?m)^`+id+` SUCCESS prod$`)
	if c := stop(); c != 0 {
		t.Fatalf("exit %d after cancel, want 0; stderr:\n%s", c, errOut.String())
	}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !regexp.MustCompile(`^dpl_[0-9A-Z]{26} [A-Z_]+ prod$`).MatchString(l) {
			t.Errorf("line %q is not a filtered item", l)
		}
	}
}

func TestActivityWatchIntervalBound(t *testing.T) {
	code, _, stderr := runCLI(t, nil, "activity", "--watch", "--interval", "1ms")
	if code != 2 || !strings.Contains(stderr, "--interval must be at least 100ms") {
		t.Fatalf("exit %d, stderr %q; want 2 and the bound", code, stderr)
	}
}
