package cli_test

import (
	"context"
	"net/http/httptest"
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

// startCLIWith is startCLI with more environment variables.
func startCLIWith(server string, grace time.Duration, extra map[string]string, args ...string) (*enginetest.SyncBuffer, chan followResult) {
	env := map[string]string{"MANENT_SERVER": server, "MANENT_TOKEN": servertest.DefaultToken}
	for k, v := range extra {
		env[k] = v
	}
	stdout, stderr := &enginetest.SyncBuffer{}, &enginetest.SyncBuffer{}
	done := make(chan followResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		code := cli.Run(ctx, cli.Invocation{
			Args: args, Stdout: stdout, Stderr: stderr,
			Getenv:       func(k string) string { return env[k] },
			PollInterval: 20 * time.Millisecond, FollowGrace: grace,
		})
		done <- followResult{code, stdout, stderr}
	}()
	return stderr, done
}

// A CI user whose servers take longer than 30 s to come back (a rolling
// restart, a PostgreSQL failover, a slow image pull) says how long the
// following commands ride an outage out: --follow-grace,
// MANENT_FOLLOW_GRACE or follow_grace:. An outage longer than the default
// and shorter than the user's grace ends with the deploy's result, not exit
// 4. The grace was fixed at 30 s.
func TestFollowGraceIsTheUsers(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	proxy := &cutProxy{target: srv.URL}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	gate := filepath.Join(t.TempDir(), "gate")
	desc := writeSlowDescriptor(t, "while [ ! -f '"+gate+"' ]; do sleep 0.05; done")

	// The invocation's own grace (what the default stands for here) is
	// 500ms; the user's is 45s.
	const short = 500 * time.Millisecond
	deployErr, deployDone := startCLIWith(front.URL, short, map[string]string{"MANENT_FOLLOW_GRACE": "45s"}, "deploy", "-f", desc, "--wait")
	waitFor(t, "the step to run", func() bool { return strings.Contains(deployErr.String(), "step slow running") })
	id := regexp.MustCompile(`dpl_[0-9A-Z]+`).FindString(deployErr.String())
	waitErr, waitDone := startCLIWith(front.URL, short, nil, "wait", id, "--follow-grace", "45s")
	logsErr, logsDone := startCLIWith(front.URL, short, nil, "logs", "-f", id, "--follow-grace=45s")
	followers := map[string]*enginetest.SyncBuffer{"deploy --wait": deployErr, "wait": waitErr, "logs -f": logsErr}
	waitFor(t, "every follower to see the step run", func() bool {
		for _, e := range followers {
			if !strings.Contains(e.String(), "step slow running") {
				return false
			}
		}
		return true
	})

	proxy.cut.Store(true)
	waitFor(t, "every follower to say it asks again for 45s", func() bool {
		for _, e := range followers {
			// Every worker may be down: the deploy is not said to go on
			// regardless.
			if !strings.Contains(e.String(), "asking again for 45s (the deploy is kept on the server: it goes on there, or once the server is back)") {
				return false
			}
		}
		return true
	})
	// Away for several times the short grace: nobody gives up.
	away := time.After(6 * short)
outage:
	for {
		var res followResult
		select {
		case res = <-deployDone:
		case res = <-waitDone:
		case res = <-logsDone:
		case <-away:
			break outage
		}
		t.Fatalf("a follower ended during the outage: exit %d\nstderr:\n%s", res.code, res.stderr)
	}
	proxy.cut.Store(false)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	expectFollowers(t, map[string]chan followResult{"deploy --wait": deployDone, "wait": waitDone, "logs -f": logsDone}, 0)
}

// A follow grace that is not a duration of at least a second is a usage
// error (exit 2) that names where it came from.
func TestFollowGraceRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"flag zero", nil, []string{"wait", "dpl_x", "--follow-grace", "0"}, `invalid follow grace "0s": want a duration of at least 1s`},
		{"env not a duration", map[string]string{"MANENT_FOLLOW_GRACE": "soon"}, []string{"wait", "dpl_x"}, `invalid follow grace "soon"`},
		{"env below a second", map[string]string{"MANENT_FOLLOW_GRACE": "10ms"}, []string{"logs", "-f", "dpl_x"}, `invalid follow grace "10ms"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"MANENT_SERVER": "http://127.0.0.1:1", "MANENT_TOKEN": "t"}
			for k, v := range tc.env {
				env[k] = v
			}
			code, _, stderr := runCLI(t, env, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "MANENT_FOLLOW_GRACE") {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q with the hint", code, stderr, tc.want)
			}
		})
	}
}

// `activity --watch` rides out a server that stops answering for the
// follow grace, as the commands following one deploy do, and says so once
// on stderr; it then goes on. It asked again silently for a fixed 30 s.
func TestActivityWatchSaysTheServerIsAway(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	proxy := &cutProxy{target: srv.URL}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	stdout, stderr := &enginetest.SyncBuffer{}, &enginetest.SyncBuffer{}
	env := map[string]string{"MANENT_SERVER": front.URL, "MANENT_TOKEN": srv.Token}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, cli.Invocation{
			Args: []string{"activity", "--watch", "--interval", "100ms", "--follow-grace", "45s"}, Stdout: stdout, Stderr: stderr,
			Getenv: func(k string) string { return env[k] }, PollInterval: 20 * time.Millisecond,
		})
	}()
	waitFor(t, "the watch to start", func() bool { return strings.Contains(stderr.String(), "watching (Ctrl-C to stop)") })

	proxy.cut.Store(true)
	waitFor(t, "the watch to say the server is away", func() bool {
		return regexp.MustCompile(`(?m)^server .* unreachable: .*; asking again for 45s$`).MatchString(stderr.String())
	})
	proxy.cut.Store(false)
	gate := filepath.Join(t.TempDir(), "gate")
	code, out, errOut := runCLI(t, map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token},
		"deploy", "-f", gatedDescriptor(t, "1.0.0", gate), "--jq", ".id")
	if code != 0 {
		t.Fatalf("deploy: exit %d\n%s", code, errOut)
	}
	id := strings.TrimSpace(out)
	waitFor(t, "the watch to show the deploy after the outage", func() bool { return strings.Contains(stdout.String(), id) })
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d after Ctrl-C, want 0\nstderr:\n%s", code, stderr)
	}
	if n := strings.Count(stderr.String(), "asking again"); n != 1 {
		t.Errorf("stderr:\n%s\nwant the outage said once, got %d", stderr, n)
	}
}
