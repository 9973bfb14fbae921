package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/envconfig"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

func configStep(t *testing.T, d *manent.Deployment) map[string]any {
	t.Helper()
	for _, s := range d.Steps {
		if s.Name == "config" {
			var out map[string]any
			if err := json.Unmarshal(s.Output, &out); err != nil {
				t.Fatalf("config output %s: %v", s.Output, err)
			}
			return out
		}
	}
	t.Fatal("no config step")
	return nil
}

// The files provider: the environment's target and parameters are merged
// under its descriptor policy; refusals come all at once; validate shows the
// effective deploy; the config step records the files' revision.
func TestEnvironmentFilesProvider(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	targets := filepath.Join(dir, "targets")
	env := fmt.Sprintf(`target: {plugin: local, with: {dir: %q}}
parameters: {replicas: 2, region: eu}
rollback: {enabled: true}
descriptor_policy: {parameters: [replicas]}
`, targets)
	if err := os.WriteFile(filepath.Join(dir, "staging.yaml"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil, func(c *node.Config) {
		configured(c)
		c.Environments = envconfig.Settings{Provider: "files", Dir: dir}
		c.Plugins.Local.Root = targets
	})
	c := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	art := artifactFile(t)
	base := fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: staging\nversion: \"7\"\nartifact: {url: %q}\n", art)

	// Two refused parameters and a target conflict, in one 422.
	_, err := c.Submit(ctx, []byte(base+"parameters: {replicas: 3, debug: true, region: us}\ntarget: {plugin: script, with: {command: [\"true\"]}}\n"), false)
	var me *manent.Error
	if !errorsAs(err, &me) || me.Code != manent.EInvalid {
		t.Fatalf("conflicting submit: %v", err)
	}
	paths := map[string]bool{}
	for _, f := range me.Fields {
		paths[f.Path] = true
	}
	for _, want := range []string{"/parameters/debug", "/parameters/region", "/target"} {
		if !paths[want] {
			t.Errorf("errors %v: missing %s", me.Fields, want)
		}
	}

	// validate shows the effective deploy.
	res, err := c.Submit(ctx, []byte(base+"parameters: {replicas: 3}\n"), true)
	if err != nil {
		t.Fatalf("%v %+v", err, err)
	}
	eff, _ := json.Marshal(res.Effective)
	for _, want := range []string{`"replicas":3`, `"region":"eu"`, `"plugin":"local"`, `"enabled":true`} {
		if !strings.Contains(string(eff), want) {
			t.Errorf("effective %s: want %s", eff, want)
		}
	}

	res, err = c.Submit(ctx, []byte(base+"parameters: {replicas: 3}\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	d, err := c.Wait(wctx, res.ID, 50*time.Millisecond)
	if err != nil || d.State != manent.StateSuccess {
		t.Fatalf("deploy: %v %+v", err, d)
	}
	out := configStep(t, d)
	if !strings.HasPrefix(fmt.Sprint(out["source"]), "files:") || fmt.Sprint(out["revision"]) == "" {
		t.Errorf("config step output %v: want the files source and revision", out)
	}
	if _, err := os.Stat(filepath.Join(targets, "current")); err != nil {
		t.Errorf("the environment's target was not used: %v", err)
	}
}

// The provider is down at submission: the deploy is accepted with a notice
// and the config step checks it once the provider answers, recording its
// revision (the ETag).
func TestEnvironmentProviderDownAtSubmission(t *testing.T) {
	t.Parallel()
	var up atomic.Bool
	var calls atomic.Int64
	targets := filepath.Join(t.TempDir(), "targets")
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if !up.Load() {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("ETag", `"rev-42"`)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"target": {"plugin": "local", "with": {"dir": %q}}, "parameters": {"replicas": 2}}`, targets)
	}))
	defer provider.Close()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil, func(c *node.Config) {
		configured(c)
		c.Environments = envconfig.Settings{Provider: "http", URL: provider.URL + "/environments/{environment}", Timeout: 2 * time.Second}
		c.Plugins.Local.Root = targets
	})
	c := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	// Hold the queue so the provider can come back before the config step:
	// a deploy ahead of ours on the same environment waits on a gate.
	gate := filepath.Join(t.TempDir(), "gate")
	first, err := c.Submit(ctx, []byte(gatedDescriptor(artifactFile(t), "staging", gate)+fmt.Sprintf("target: {plugin: local, with: {dir: %q}}\n", targets)), false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Submit(ctx, []byte(fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: staging\nversion: \"8\"\nartifact: {url: %q}\n", artifactFile(t))), false)
	if err != nil {
		t.Fatalf("submit while the provider is down: %v", err)
	}
	if res.State != manent.StateEnqueued || !strings.Contains(res.Notice, "config step") {
		t.Fatalf("answer %+v: want ENQUEUED with a notice that the config step will check", res)
	}
	up.Store(true)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if d, err := c.Wait(wctx, first.ID, 50*time.Millisecond); err != nil || d.State != manent.StateSuccess {
		t.Fatalf("first deploy: %v %+v", err, d)
	}
	d, err := c.Wait(wctx, res.ID, 50*time.Millisecond)
	if err != nil || d.State != manent.StateSuccess {
		t.Fatalf("deploy: %v %+v", err, d)
	}
	out := configStep(t, d)
	if fmt.Sprint(out["revision"]) != `"rev-42"` && fmt.Sprint(out["revision"]) != "rev-42" {
		t.Errorf("config output %v: want revision rev-42", out)
	}
	if fmt.Sprint(out["parameters"]) != "map[replicas:2]" {
		t.Errorf("config output parameters %v", out["parameters"])
	}
}
