package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/pkg/urlpolicy"
	"github.com/manent-io/manent/plugins/builtin"
)

// testServer is a real manent server (store, DBOS engine, HTTP API) on a
// loopback port.
type testServer struct {
	URL     string
	Store   *store.Store
	Engine  *engine.Engine
	DataDir string
	API     *server.Server
}

// A test that starts a server (newTestServer, servertest.Start, newFlow,
// newAgentServer, loggedServer) mostly waits on DBOS polls and HTTP, so it
// calls t.Parallel() when it touches no process-wide state: no
// server.SetStreamTiming or SetStreamRecheck, no servertest.SetReadFault,
// no t.Setenv, no reading of a process-wide count (StreamsCut,
// StreamRechecks, manent_sse_streams and manent_sse_cut_total of
// /metrics) or of the process's memory. Each fixture has its own temp dir
// and its own database (enginetest.SQLite, enginetest.Postgres: a random
// database per call) and a loopback port of its own. Parallel tests run
// once the serial ones are done, so a serial test's hook never reaches
// them. Tests with a narrow wall-clock window (TestSlowBodyIs408's 300 ms
// read timeout, TestMetricsWorkers' heartbeats) stay serial, and so do the
// unit tests that start nothing (they take no time).
//
// newTestServer starts a server on db with the given static tokens and RBAC
// rules; the token "admin-token" is the bootstrap admin. It is built by
// pkg/node from a configuration, as the binary builds it; opts change that
// configuration (local trial mode with fast retries by default).
func newTestServer(t *testing.T, db string, tokens []auth.TokenConfig, rules []auth.RBACRule, opts ...func(*node.Config)) *testServer {
	t.Helper()
	cfg := servertest.Config(t.TempDir())
	cfg.Database, cfg.ExecutorID = db, "test"
	cfg.Auth.Tokens, cfg.RBAC = tokens, rules
	for _, o := range opts {
		o(cfg)
	}
	ctx := context.Background()
	n, err := node.Open(ctx, cfg, node.Options{Plugins: builtin.Register, BootstrapToken: "admin-token"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(n.API)
	t.Cleanup(func() {
		hs.Close()
		n.Close(5 * time.Second)
	})
	return &testServer{URL: hs.URL, Store: n.Store, Engine: n.Engine, DataDir: cfg.DataDir, API: n.API}
}

// configured makes cfg a configured server (not local trial mode) that
// still allows the trial artifact sources.
func configured(cfg *node.Config) {
	cfg.Trial = false
	cfg.Artifacts.Sources = urlpolicy.TrialPatterns()
	cfg.Plugins.Steps = []string{"script"}
}

func errorsAs(err error, target **manent.Error) bool { return errors.As(err, target) }

func artifactFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "app.txt")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return "file://" + p
}

// gatedDescriptor is a deploy whose step waits (bounded) until gate exists.
func gatedDescriptor(art, env, gate string) string {
	wait := fmt.Sprintf(`i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done`, gate)
	return fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: %s\nversion: \"1\"\nartifact: {url: %q}\nsteps:\n  - {name: gate, before: deploy, plugin: script, with: {command: [sh, -c, %q]}}\n", env, art, wait)
}

// startGated submits descriptor — gatedDescriptor's, perhaps changed —
// whose gate step waits for the returned file, and waits until the gate
// step runs. The gate opens when the test ends.
func startGated(t *testing.T, c *api.Client, descriptor func(art, gate string) string) (id, gate string) {
	t.Helper()
	gate = filepath.Join(t.TempDir(), "gate")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	ctx := context.Background()
	res, err := c.Submit(ctx, []byte(descriptor(artifactFile(t), gate)), false)
	if err != nil {
		t.Fatal(err)
	}
	waitStepRunning(t, c, res.ID, "gate")
	return res.ID, gate
}

// waitStepRunning waits until step of deploy id runs.
func waitStepRunning(t *testing.T, c *api.Client, id, step string) {
	t.Helper()
	enginetest.Eventually(t, 30*time.Second, func() bool {
		d, err := c.Deployment(context.Background(), id)
		if err != nil || d.State != manent.StatePending {
			return false
		}
		for _, st := range d.Steps {
			if st.Name == step && st.State == manent.StepRunning {
				return true
			}
		}
		return false
	}, "step %s of %s running", step, id)
}

// gatedStaging is gatedDescriptor in staging.
func gatedStaging(art, gate string) string { return gatedDescriptor(art, "staging", gate) }

func store_filter(action string) store.AuditFilter { return store.AuditFilter{Action: action} }

// do sends body with token; a body that begins with "{" goes as
// application/json, as the JSON routes want it.
func do(t *testing.T, method, url, token, body string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(body, "{") {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// SSE answers stream until the deploy ends; the first bytes are enough.
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, b, resp.Header
}
