package cli_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/cli"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/plugins/builtin"
)

// restartable is a real manent-server (pkg/node, as the binary builds it)
// that can be stopped and started again on the same address and the same
// SQLite file: a server restart as a user sees it.
type restartable struct {
	t    *testing.T
	dir  string
	addr string
	node *node.Node
	http *http.Server
	// token is the admin token of the next start (servertest.DefaultToken
	// when ""): changing it revokes the previous one.
	token string
	// endRequests cancels the context of every request in flight: event
	// streams then end cleanly, as when a server shuts down gracefully.
	endRequests context.CancelFunc
}

func startRestartable(t *testing.T) *restartable {
	t.Helper()
	r := &restartable{t: t, dir: t.TempDir(), addr: "127.0.0.1:0"}
	r.start()
	t.Cleanup(func() { r.stop(false) })
	return r
}

func (r *restartable) url() string { return "http://" + r.addr }

func (r *restartable) start() {
	r.t.Helper()
	ctx := context.Background()
	token := r.token
	if token == "" {
		token = servertest.DefaultToken
	}
	n, err := node.Open(ctx, servertest.Config(r.dir), node.Options{
		Plugins: builtin.Register, BootstrapToken: token, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		r.t.Fatalf("open server: %v", err)
	}
	if err := n.Launch(ctx); err != nil {
		n.Close(time.Second)
		r.t.Fatalf("launch engine: %v", err)
	}
	// The port of the previous life may take a moment to be free again.
	var ln net.Listener
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ln, err = net.Listen("tcp", r.addr)
		if err == nil || time.Now().After(deadline) {
			break
		}
		<-tick.C
	}
	if err != nil {
		n.Close(time.Second)
		r.t.Fatalf("listen on %s again: %v", r.addr, err)
	}
	r.addr = ln.Addr().String()
	r.node = n
	base, cancel := context.WithCancel(context.Background())
	r.endRequests = cancel
	r.http = &http.Server{Handler: n.API, BaseContext: func(net.Listener) context.Context { return base }}
	go func() { _ = r.http.Serve(ln) }()
}

// stop ends the server: open event streams end cleanly (graceful) or are
// cut, then the engine and the store are shut down.
func (r *restartable) stop(graceful bool) {
	if r.node == nil {
		return
	}
	if graceful {
		r.endRequests()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = r.http.Shutdown(ctx)
		cancel()
	}
	_ = r.http.Close()
	r.endRequests()
	r.node.Close(5 * time.Second)
	r.node = nil
}

// waitFor polls cond until it holds or 60 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// `manent logs -f` and `manent wait` while the server restarts (same
// address, same SQLite file): both ride it out. logs -f resumes from the
// last event id and prints exactly the deploy's log, each line once, in
// order, and both exit 0 when the deploy ends SUCCESS. Graceful: the
// server ends the streams before it goes; abrupt: they are cut.
func TestFollowAcrossServerRestart(t *testing.T) {
	for _, graceful := range []bool{true, false} {
		t.Run(map[bool]string{true: "graceful", false: "abrupt"}[graceful], func(t *testing.T) {
			followAcrossRestart(t, graceful)
		})
	}
}

func followAcrossRestart(t *testing.T, graceful bool) {
	srv := startRestartable(t)
	dir := t.TempDir()
	art := writeArtifact(t, dir, "hello\n")
	desc := fmt.Sprintf(`apiVersion: manent/v1
application: billing
environment: prod
version: 1.0.0
artifact: {url: "file://%s"}
steps:
  - name: talk
    before: activation
    plugin: script
    with: {command: ["sh", "-c", "for i in 1 2 3 4 5 6 7 8; do echo line $i; sleep 0.25; done"]}
`, art)
	client := api.NewClient(srv.url(), servertest.DefaultToken, nil)
	res, err := client.Submit(context.Background(), []byte(desc), false)
	if err != nil {
		t.Fatal(err)
	}

	env := map[string]string{"MANENT_SERVER": srv.url(), "MANENT_TOKEN": servertest.DefaultToken}
	type result struct {
		code           int
		stdout, stderr *enginetest.SyncBuffer
	}
	run := func(args ...string) (*enginetest.SyncBuffer, chan result) {
		stdout, stderr := &enginetest.SyncBuffer{}, &enginetest.SyncBuffer{}
		done := make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			code := cli.Run(ctx, cli.Invocation{
				Args: args, Stdout: stdout, Stderr: stderr,
				Getenv: func(k string) string { return env[k] }, PollInterval: 20 * time.Millisecond,
			})
			done <- result{code, stdout, stderr}
		}()
		return stdout, done
	}
	logsOut, logsDone := run("logs", "-f", res.ID)
	_, waitDone := run("wait", res.ID, "--timeout", "100s")

	// Restart the server while the step talks.
	waitFor(t, "the CLI to print line 2", func() bool { return strings.Contains(logsOut.String(), "[talk] line 2") })
	srv.stop(graceful)
	srv.start()

	logs := <-logsDone
	if logs.code != 0 {
		t.Fatalf("logs -f: exit %d\nstdout:\n%s\nstderr:\n%s", logs.code, logs.stdout, logs.stderr)
	}
	wait := <-waitDone
	if wait.code != 0 {
		t.Fatalf("wait: exit %d\nstdout:\n%s\nstderr:\n%s", wait.code, wait.stdout, wait.stderr)
	}

	// What the CLI printed is exactly the server's log: no line lost, none twice.
	got, err := api.NewClient(srv.url(), servertest.DefaultToken, nil).Logs(context.Background(), res.ID)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, l := range got.Lines {
		want = append(want, "["+l.Step+"] "+l.Text)
	}
	printed := regexp.MustCompile(`(?m)^\S+ (.*)$`).FindAllStringSubmatch(logs.stdout.String(), -1)
	var lines []string
	for _, m := range printed {
		lines = append(lines, m[1])
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("logs -f printed\n%s\n\nthe server's log is\n%s\nstderr:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"), logs.stderr)
	}
	if n := strings.Count(logs.stdout.String(), "[talk] line 8"); n < 1 {
		t.Errorf("the step's last line is missing:\n%s", logs.stdout)
	}
}
