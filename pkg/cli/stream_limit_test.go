package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/cli"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/servertest"
)

// `manent logs -f` when its identity already holds as many event streams
// as the server allows (limits.streams_per_identity, 429): it tries again,
// and follows the log once a stream is free, instead of failing at once.
func TestLogsFollowWaitsForAFreeStream(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.WithConfig(func(c *node.Config) { c.Limits.StreamsPerIdentity = 1 }))
	dir := t.TempDir()
	art := writeArtifact(t, dir, "hello\n")
	gate := filepath.Join(dir, "gate")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	desc := fmt.Sprintf(`apiVersion: manent/v1
application: billing
environment: prod
version: 1.0.0
artifact: {url: "file://%s"}
steps:
  - {name: talk, before: activation, plugin: script, with: {command: ["sh", "-c", "echo hello; while [ ! -e %s ]; do sleep 0.05; done; echo bye"]}}
`, art, gate)
	res, err := srv.Client().Submit(context.Background(), []byte(desc), false)
	if err != nil {
		t.Fatal(err)
	}
	// The identity's one stream, held open.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/deployments/"+res.ID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+srv.Token)
	held, err := http.DefaultClient.Do(req)
	if err != nil || held.StatusCode != http.StatusOK {
		t.Fatalf("the held stream: %v %v", held, err)
	}
	if _, err := bufio.NewReader(held.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	env := map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := make(chan int, 1)
	go func() {
		code <- cli.Run(ctx, cli.Invocation{
			Args: []string{"logs", "-f", "--quiet", res.ID}, Stdout: &stdout, Stderr: &stderr,
			Getenv: func(k string) string { return env[k] }, PollInterval: 20 * time.Millisecond,
		})
	}()
	// Refused for now: the follower keeps trying. Free the stream, then
	// let the deploy end.
	select {
	case c := <-code:
		t.Fatalf("logs -f exited %d while the stream was taken:\n%s", c, stderr.String())
	case <-time.After(500 * time.Millisecond): // the refusals' window, not synchronisation
	}
	held.Body.Close()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if c := <-code; c != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", c, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "[talk] hello") || !strings.Contains(stdout.String(), "[talk] bye") {
		t.Fatalf("stdout:\n%s", stdout.String())
	}
}
