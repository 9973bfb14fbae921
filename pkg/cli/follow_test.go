package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/cli"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/servertest"
)

// droppingProxy relays requests to a server, but cuts each of the first
// `drops` event streams abruptly after `after` events, the way a flaky
// network or a proxy restart would. Not enginetest.Relay: that reads each
// answer whole before passing it on, and an event stream must go through
// live, event by event, to be cut after some.
type droppingProxy struct {
	target string
	drops  int
	after  int

	mu      sync.Mutex
	streams []string // the Last-Event-ID of each stream request
}

func (p *droppingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	p.mu.Lock()
	p.streams = append(p.streams, r.Header.Get("Last-Event-ID"))
	n := len(p.streams)
	p.mu.Unlock()
	br := bufio.NewReader(resp.Body)
	events, inEvent := 0, false
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			_, _ = w.Write(line)
		}
		if err != nil {
			return
		}
		switch {
		case bytes.HasPrefix(line, []byte("event:")):
			inEvent = true
		case len(bytes.TrimSpace(line)) == 0 && inEvent:
			inEvent = false
			events++
			w.(http.Flusher).Flush()
			if n <= p.drops && events == p.after {
				panic(http.ErrAbortHandler) // drop the connection, no clean end
			}
		}
	}
}

// `manent logs -f` through connections that drop: it reconnects with
// Last-Event-ID and prints every line once, in order, then exits 0.
func TestLogsFollowReconnects(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
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
    with: {command: ["sh", "-c", "for i in 1 2 3 4 5 6; do sleep 0.3; echo line $i; done"]}
`, art)
	res, err := srv.Client().Submit(context.Background(), []byte(desc), false)
	if err != nil {
		t.Fatal(err)
	}

	proxy := &droppingProxy{target: srv.URL, drops: 2, after: 3}
	ps := httptest.NewServer(proxy)
	defer ps.Close()

	var stdout, stderr bytes.Buffer
	env := map[string]string{"MANENT_SERVER": ps.URL, "MANENT_TOKEN": srv.Token}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := cli.Run(ctx, cli.Invocation{
		Args: []string{"logs", "-f", res.ID}, Stdout: &stdout, Stderr: &stderr,
		Getenv: func(k string) string { return env[k] }, PollInterval: 20 * time.Millisecond,
	})
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	var talk []string
	for _, l := range strings.Split(stdout.String(), "\n") {
		if m := regexp.MustCompile(`\[talk\] (line \d)$`).FindStringSubmatch(l); m != nil {
			talk = append(talk, m[1])
		}
	}
	if got, want := strings.Join(talk, ","), "line 1,line 2,line 3,line 4,line 5,line 6"; got != want {
		t.Errorf("printed %s, want %s\nstdout:\n%s", got, want, stdout.String())
	}
	if n := strings.Count(stdout.String(), "[config]"); n != 1 {
		t.Errorf("the config step's line printed %d times, want once", n)
	}
	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	if len(proxy.streams) < 3 {
		t.Fatalf("%d stream connections, want at least 3 (two drops)", len(proxy.streams))
	}
	if proxy.streams[0] != "" || proxy.streams[1] == "" || proxy.streams[2] == "" || proxy.streams[1] == proxy.streams[2] {
		t.Errorf("Last-Event-ID of the connections: %q, want none, then the last id each time", proxy.streams)
	}
}

// logs -f on a deploy whose log retention removed says so on stderr, as
// `manent logs` does: an empty stream read as a deploy that logged nothing.
func TestLogsFollowSaysRetentionRemovedTheLog(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	dir := t.TempDir()
	art := writeArtifact(t, dir, "hello\n")
	desc := fmt.Sprintf(`apiVersion: manent/v1
application: billing
environment: prod
version: 1.0.0
artifact: {url: "file://%s"}
`, art)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := srv.Client().Submit(ctx, []byte(desc), false)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := srv.Client().Wait(ctx, res.ID, 20*time.Millisecond); err != nil || d.State != manent.StateSuccess {
		t.Fatalf("the deploy: %+v, %v", d, err)
	}
	if n, err := srv.Store.PruneLogs(ctx, time.Now().Add(time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("PruneLogs: %d, %v", n, err)
	}
	var stdout, stderr bytes.Buffer
	env := map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token}
	code := cli.Run(ctx, cli.Invocation{
		Args: []string{"logs", "-f", res.ID}, Stdout: &stdout, Stderr: &stderr,
		Getenv: func(k string) string { return env[k] }, PollInterval: 20 * time.Millisecond,
	})
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !regexp.MustCompile(`log lines removed by retention from \d{4}-\d\d-\d\dT`).MatchString(stderr.String()) {
		t.Errorf("stderr does not say the log was removed:\n%s\nstdout:\n%s", stderr.String(), stdout.String())
	}
}
