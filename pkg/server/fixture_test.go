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

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/plugins/local"
	"github.com/manent-io/manent/plugins/script"
)

// testServer is a real manent server (store, DBOS engine, HTTP API) on a
// loopback port.
type testServer struct {
	URL     string
	Store   *store.Store
	Engine  *engine.Engine
	DataDir string
}

// newTestServer starts a server on db with the given static tokens and RBAC
// rules; the token "admin-token" is the bootstrap admin.
func newTestServer(t *testing.T, db string, tokens []auth.TokenConfig, rules []auth.RBACRule, opts ...func(*server.Config)) *testServer {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	reg := plugin.NewRegistry()
	sp := script.New()
	for _, err := range []error{reg.RegisterTarget("local", local.New()), reg.RegisterTarget("script", sp), reg.RegisterRunner("script", sp)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	authn, err := auth.New(auth.Config{Tokens: tokens, BootstrapToken: "admin-token"})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := auth.NewPolicy(append([]auth.RBACRule{auth.BootstrapRule()}, rules...))
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Guard: &server.AuthGuard{Authn: authn, Policy: policy},
		DataDir: filepath.Join(dir, "data"), TrialMode: true}
	for _, o := range opts {
		o(&cfg)
	}
	var envs engine.Environments
	if cfg.Environments != nil {
		envs = cfg.Environments
	}
	eng, err := engine.New(ctx, st, engine.Config{
		ExecutorID: "test", DataDir: filepath.Join(dir, "data"), Plugins: reg, Environments: envs,
		RetryBase: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond, QueuePoll: 50 * time.Millisecond,
		Governance: cfg.Governance, SchedulerPoll: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Engine = eng
	api := server.New(cfg)
	eng.SetTick(api.Tick)
	if err := eng.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(func() {
		hs.Close()
		eng.Shutdown(5 * time.Second)
		st.Close()
	})
	return &testServer{URL: hs.URL, Store: st, Engine: eng, DataDir: cfg.DataDir}
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

func store_filter(action string) store.AuditFilter { return store.AuditFilter{Action: action} }

func do(t *testing.T, method, url, token, body string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
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
