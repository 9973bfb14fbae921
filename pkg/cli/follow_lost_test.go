package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/cli"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/servertest"
)

// cutProxy relays requests to a real server until the network is cut: then
// every request is dropped without an answer (a load balancer that lost its
// backend, a server being restarted). cutAfterSubmit cuts it as soon as the
// server has accepted a deploy, before the CLI's first poll.
type cutProxy struct {
	target         string
	cutAfterSubmit bool
	cut            atomic.Bool
}

func (p *cutProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	enginetest.Relay{
		Target: p.target,
		Before: func(http.ResponseWriter, *http.Request) bool {
			if p.cut.Load() {
				panic(http.ErrAbortHandler)
			}
			return false
		},
		After: func(_ http.ResponseWriter, r *http.Request, resp *http.Response) bool {
			if p.cutAfterSubmit && r.Method == http.MethodPost && resp.StatusCode == http.StatusAccepted {
				p.cut.Store(true)
			}
			return false
		},
	}.ServeHTTP(w, r)
}

type followResult struct {
	code           int
	stdout, stderr *enginetest.SyncBuffer
}

// followThree submits a deploy whose step runs script with `deploy
// --wait`, then follows it with `wait` and `logs -f` (each with grace),
// and returns its id and the three followers once each has seen the step
// run.
func followThree(t *testing.T, server string, grace time.Duration, script string) (id string, followers map[string]chan followResult) {
	t.Helper()
	desc := writeSlowDescriptor(t, script)
	deployErr, deployDone := startCLI(server, grace, "deploy", "-f", desc, "--wait")
	waitFor(t, "the step to run", func() bool { return strings.Contains(deployErr.String(), "step slow running") })
	id = regexp.MustCompile(`dpl_[0-9A-Z]+`).FindString(deployErr.String())
	waitErr, waitDone := startCLI(server, grace, "wait", id)
	logsErr, logsDone := startCLI(server, grace, "logs", "-f", id)
	waitFor(t, "wait and logs -f to see the step run", func() bool {
		return strings.Contains(waitErr.String(), "step slow running") && strings.Contains(logsErr.String(), "step slow running")
	})
	return id, map[string]chan followResult{"deploy --wait": deployDone, "wait": waitDone, "logs -f": logsDone}
}

// expectFollowers waits for each follower to end, checks that it exits
// with code and says every one of want on stderr, and returns what each
// said there.
func expectFollowers(t *testing.T, followers map[string]chan followResult, code int, want ...string) (stderr map[string]string) {
	t.Helper()
	stderr = map[string]string{}
	for name, done := range followers {
		res := <-done
		stderr[name] = res.stderr.String()
		if res.code != code {
			t.Errorf("%s: exit %d, want %d\nstderr:\n%s", name, res.code, code, res.stderr)
			continue
		}
		for _, w := range want {
			if got := res.stderr.String(); !strings.Contains(got, w) {
				t.Errorf("%s: stderr:\n%s\nwant %q", name, got, w)
			}
		}
	}
	return stderr
}

// startCLI runs the CLI in-process against server, as a CI job does (no
// terminal, MANENT_SERVER and MANENT_TOKEN in the environment).
func startCLI(server string, grace time.Duration, args ...string) (*enginetest.SyncBuffer, chan followResult) {
	env := map[string]string{"MANENT_SERVER": server, "MANENT_TOKEN": servertest.DefaultToken}
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

func writeSlowDescriptor(t *testing.T, command string) string {
	t.Helper()
	dir := t.TempDir()
	art := writeArtifact(t, dir, "hello\n")
	p := filepath.Join(dir, "deploy.yml")
	desc := fmt.Sprintf(`apiVersion: manent/v1
application: billing
environment: prod
version: 1.0.0
artifact: {url: "file://%s"}
steps:
  - name: slow
    before: activation
    plugin: script
    with: {command: ["sh", "-c", %q]}
`, art, command)
	if err := os.WriteFile(p, []byte(desc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The server accepted the deploy (202), then the network is cut before the
// first poll: `deploy --wait` has had its answer, so it rides the outage out
// like one later in the deploy, says so on stderr, and exits 0 when the
// deploy ends SUCCESS once the network is back. It exited 4 after its own
// retries of the first poll (about 3 s), the deploy running on.
func TestDeployWaitRidesOutACutRightAfterTheSubmission(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	proxy := &cutProxy{target: srv.URL, cutAfterSubmit: true}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	stderr, done := startCLI(front.URL, 30*time.Second, "deploy", "-f", writeDescriptor(t, "1.0.0"), "--wait")
	var res followResult
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case res = <-done:
			break wait
		case <-deadline:
			t.Fatalf("deploy --wait did not end; stderr:\n%s", stderr)
		case <-tick.C:
			if proxy.cut.Load() && strings.Contains(stderr.String(), "asking again") {
				proxy.cut.Store(false) // the network is back
			}
		}
	}
	if res.code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stdout.String(), ": SUCCESS") {
		t.Errorf("stdout:\n%s\nwant the SUCCESS line", res.stdout)
	}
	if got := res.stderr.String(); !strings.Contains(got, "unreachable") || !strings.Contains(got, "(the deploy is kept on the server: it goes on there, or once the server is back)") {
		t.Errorf("stderr:\n%s\nwant the outage said while it lasts", got)
	}
}

// The server stops answering in the middle of a deploy and stays away past
// the grace: `deploy --wait` and `wait` exit 4 as before, and say that the
// deploy goes on and how to follow it, so that a CI job that failed on it
// is not re-run to submit the deploy a second time. They said only
// "server … unreachable" and "check --server".
func TestFollowingSaysTheDeployGoesOnWhenTheServerStaysAway(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	proxy := &cutProxy{target: srv.URL}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	id, followers := followThree(t, front.URL, time.Second, "sleep 10")
	proxy.cut.Store(true)

	want := fmt.Sprintf("hint: deploy %s is kept on the server (it goes on there, or once the server is back): follow it with 'manent wait %s' (do not submit it again)", id, id)
	for name, got := range expectFollowers(t, followers, 4, want) {
		if !regexp.MustCompile(`\(no answer for [0-9]+s while following deploy ` + id + `\)`).MatchString(got) {
			t.Errorf("%s: stderr:\n%s\nwant the error to say how long it waited", name, got)
		}
	}
}

// holdAfterSubmit relays requests to a real server; a submission is
// committed by the server, then its answer is held until the CLI goes away
// (a CI job cancelled, SIGTERM, while `manent deploy` waited for the 202).
type holdAfterSubmit struct {
	target    string
	committed chan struct{}
}

func (p *holdAfterSubmit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	enginetest.Relay{
		Target: p.target, Detached: true,
		After: func(_ http.ResponseWriter, r *http.Request, _ *http.Response) bool {
			if r.Method != http.MethodPost {
				return false
			}
			close(p.committed)
			<-r.Context().Done()
			return true
		},
	}.ServeHTTP(w, r)
}

// `manent deploy` interrupted (SIGINT/SIGTERM: its context ends) while it
// waits for the server's answer: the server may have accepted the deploy,
// so the CLI prints the Idempotency-Key it sent and the command that gets
// that deploy back without submitting a second; run, it answers with the
// one deploy. It exited 130 without a word, and a re-run job submitted the
// deploy again.
func TestDeployInterruptedWhileSubmittingNamesItsKey(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	proxy := &holdAfterSubmit{target: srv.URL, committed: make(chan struct{})}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	desc := writeDescriptor(t, "1.0.0")
	env := map[string]string{"MANENT_SERVER": front.URL, "MANENT_TOKEN": srv.Token}

	ctx, interrupt := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, cli.Invocation{Args: []string{"deploy", "-f", desc, "--wait"}, Stderr: &stderr,
			Getenv: func(k string) string { return env[k] }, PollInterval: 20 * time.Millisecond})
	}()
	select {
	case <-proxy.committed:
	case <-time.After(60 * time.Second):
		t.Fatal("the submission never reached the server")
	}
	interrupt()
	if code := <-done; code != 130 {
		t.Fatalf("exit %d, want 130\nstderr:\n%s", code, stderr.String())
	}
	m := regexp.MustCompile(`--idempotency-key (manent-cli-[0-9a-f]{32})`).FindStringSubmatch(stderr.String())
	if m == nil || !strings.Contains(stderr.String(), "the server may have accepted the deploy before the answer was lost; to get it without a second one, run: manent deploy -f "+desc+" --idempotency-key") {
		t.Fatalf("stderr:\n%s\nwant the key to submit again with", stderr.String())
	}

	code, stdout, errOut := runCLI(t, map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token},
		"deploy", "-f", desc, "--idempotency-key", m[1], "-o", "json")
	if code != 0 || !strings.Contains(errOut, "notice: already submitted with idempotency key") {
		t.Fatalf("again with the key: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, errOut)
	}
	if ids := deployIDs(t, srv); len(ids) != 1 {
		t.Errorf("deploys %v, want one", ids)
	}
}

// `manent wait` and `manent logs -f` interrupted (Ctrl-C, a CI job
// cancelled) stop waiting, not the deploy: stderr says that it goes on and
// how to stop it. Both exited 130 without a word, and a user who meant to
// stop the deploy left it to run at its scheduled time.
func TestFollowInterruptedSaysTheDeployGoesOn(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	env := map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token}
	desc := writeDescriptor(t, "1.0.0")
	at := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	f, err := os.OpenFile(desc, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(f, "schedule: {at: %q}\n", at); err != nil {
		t.Fatal(err)
	}
	f.Close()
	code, out, errOut := runCLI(t, env, "deploy", "-f", desc)
	id := regexp.MustCompile(`dpl_[0-9A-Z]+`).FindString(out)
	if code != 0 || id == "" {
		t.Fatalf("deploy: exit %d, stdout %q\nstderr:\n%s", code, out, errOut)
	}
	for _, args := range [][]string{{"wait", id}, {"logs", "-f", id}} {
		t.Run(args[0], func(t *testing.T) {
			ctx, interrupt := context.WithCancel(context.Background())
			defer interrupt()
			var stderr enginetest.SyncBuffer
			done := make(chan int, 1)
			go func() {
				done <- cli.Run(ctx, cli.Invocation{Args: args, Stdout: io.Discard, Stderr: &stderr,
					Getenv: func(k string) string { return env[k] }, PollInterval: 20 * time.Millisecond})
			}()
			// Interrupted once it has shown the deploy's state.
			enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(stderr.String(), "DELAYED") },
				"%s to show the deploy's state; stderr:\n%s", args[0], &stderr)
			interrupt()
			if code := <-done; code != 130 {
				t.Fatalf("exit %d, want 130\nstderr:\n%s", code, stderr.String())
			}
			want := fmt.Sprintf("deploy %s goes on (only the waiting stopped): 'manent cancel %s' stops it", id, id)
			if !strings.Contains(stderr.String(), want) {
				t.Fatalf("stderr:\n%s\nwant %q", stderr.String(), want)
			}
		})
	}
	// deploy --wait likewise says how to stop the deploy it submitted, not
	// only how to follow it: Ctrl-C on it is most often meant to stop the
	// deploy (it said only "follow it with 'manent wait …'").
	t.Run("deploy --wait", func(t *testing.T) {
		ctx, interrupt := context.WithCancel(context.Background())
		defer interrupt()
		var stderr enginetest.SyncBuffer
		done := make(chan int, 1)
		go func() {
			done <- cli.Run(ctx, cli.Invocation{Args: []string{"deploy", "-f", desc, "--wait"}, Stdout: io.Discard, Stderr: &stderr,
				Getenv: func(k string) string { return env[k] }, PollInterval: 20 * time.Millisecond})
		}()
		enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(stderr.String(), "DELAYED") },
			"deploy --wait to show the deploy's state; stderr:\n%s", &stderr)
		interrupt()
		if code := <-done; code != 130 {
			t.Fatalf("exit %d, want 130\nstderr:\n%s", code, stderr.String())
		}
		id := regexp.MustCompile(`deploy (dpl_[0-9A-Z]+)`).FindStringSubmatch(stderr.String())
		if id == nil {
			t.Fatalf("stderr:\n%s\nwant the deploy's id", stderr.String())
		}
		want := fmt.Sprintf("deploy %s goes on (only the waiting stopped): 'manent wait %s' follows it, 'manent cancel %s' stops it", id[1], id[1], id[1])
		if !strings.Contains(stderr.String(), want) {
			t.Fatalf("stderr:\n%s\nwant %q", stderr.String(), want)
		}
	})
}
