package node_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/plugins/builtin"
)

// A typo in pipeline.steps stops the server at start (SPEC §11.2), as a
// configuration error (manent-server exits 2), instead of failing deploys
// after they wrote their target.
func TestPipelineTypoIsAConfigurationError(t *testing.T) {
	cfg := servertest.Config(t.TempDir())
	cfg.Pipeline.Steps = []string{"artifacts", "deploy", "activaton"}
	n, err := node.Open(context.Background(), cfg, node.Options{Plugins: builtin.Register})
	if err == nil {
		n.Close(0)
		t.Fatal("a server with an unknown pipeline step started")
	}
	if !node.IsConfigError(err) || !strings.Contains(err.Error(), `unknown step "activaton"`) {
		t.Fatalf("got %v, want a configuration error naming the step", err)
	}
}

// plugins.pass_env cannot hand a step a server secret, and plugins.steps
// names step plugins only: both are configuration errors at start.
func TestPluginKeysAreChecked(t *testing.T) {
	tests := []struct {
		set  func(*node.Config)
		want string
	}{
		{func(c *node.Config) { c.Plugins.PassEnv = []string{"HTTPS_PROXY", "MANENT_BOOTSTRAP_TOKEN"} }, "pass_env[1]: MANENT_BOOTSTRAP_TOKEN"},
		{func(c *node.Config) { c.Plugins.PassEnv = []string{"ITSM_TOKEN"}; c.ITSM.TokenEnv = "ITSM_TOKEN" }, "ITSM token"},
		{func(c *node.Config) { c.Plugins.PassEnv = []string{"A=B"} }, "not a valid environment variable name"},
		{func(c *node.Config) { c.Plugins.Steps = []string{"script", "scirpt"} }, `plugins.steps[1]: unknown step plugin "scirpt"`},
	}
	for _, tt := range tests {
		cfg := servertest.Config(t.TempDir())
		tt.set(cfg)
		n, err := node.Open(context.Background(), cfg, node.Options{Plugins: builtin.Register})
		if err == nil {
			n.Close(0)
			t.Errorf("%s: the server started", tt.want)
			continue
		}
		if !node.IsConfigError(err) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("got %v, want a configuration error with %q", err, tt.want)
		}
	}
}

// A configuration mistake reported field by field (auth, RBAC) names the
// field and the reason, not only "invalid auth configuration": the operator
// reads it from manent-server's one error line.
func TestConfigErrorNamesTheField(t *testing.T) {
	cfg := servertest.Config(t.TempDir())
	cfg.Auth.Tokens = append(cfg.Auth.Tokens, auth.TokenConfig{Name: "ci", SHA256: "not-hex"})
	n, err := node.Open(context.Background(), cfg, node.Options{Plugins: builtin.Register})
	if err == nil {
		n.Close(0)
		t.Fatal("a server with a malformed token hash started")
	}
	if !node.IsConfigError(err) || !strings.Contains(err.Error(), ".sha256: must be the 64 hex digits") {
		t.Fatalf("got %q, want a configuration error naming auth.tokens[…].sha256", err)
	}
}

// A database URL manent cannot use is a configuration error (manent-server
// exits 2), like any other mistake in the configuration.
func TestBadDatabaseURLIsAConfigError(t *testing.T) {
	for _, db := range []string{"mysql://x", "sqlite:", "sqlite:" + t.TempDir() + "/m.db?busy_timeout=abc"} {
		cfg := servertest.Config(t.TempDir())
		cfg.Database = db
		n, err := node.Open(context.Background(), cfg, node.Options{Plugins: builtin.Register})
		if err == nil {
			n.Close(0)
			t.Fatalf("%s: the server started", db)
		}
		if !node.IsConfigError(err) {
			t.Errorf("%s: %v, want a configuration error", db, err)
		}
	}
}

// A negative artifact limit is a configuration error, not a download that
// fails at once (or, for max_bytes, the 1 GiB default in disguise).
func TestNegativeArtifactLimitsAreConfigErrors(t *testing.T) {
	for name, set := range map[string]func(*node.Config){
		"idle_timeout": func(c *node.Config) { c.Artifacts.IdleTimeout = -time.Second },
		"timeout":      func(c *node.Config) { c.Artifacts.Timeout = -time.Second },
		"max_bytes":    func(c *node.Config) { c.Artifacts.MaxBytes = -1 },
	} {
		cfg := servertest.Config(t.TempDir())
		set(cfg)
		n, err := node.Open(context.Background(), cfg, node.Options{Plugins: builtin.Register})
		if err == nil {
			n.Close(0)
			t.Fatalf("%s: the server started", name)
		}
		if !node.IsConfigError(err) || !strings.Contains(err.Error(), "artifacts."+name) {
			t.Errorf("%s: %v, want a configuration error naming artifacts.%s", name, err, name)
		}
	}
}

// plugins.validate_timeout reaches every external plugin: a validate that
// hangs is stopped at the configured bound, not the default 10 s, and is
// no verdict on the settings (admission answers 503 naming the bound).
func TestValidateTimeoutReachesExternalPlugins(t *testing.T) {
	dir := t.TempDir()
	plugins := filepath.Join(dir, "plugins")
	if err := os.Mkdir(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plugins, "manent-plugin-hung"), []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := servertest.Config(dir)
	cfg.Plugins.Path = []string{plugins}
	cfg.Plugins.ValidateTimeout = time.Second
	n, err := node.Open(context.Background(), cfg, node.Options{Plugins: builtin.Register})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(0)
	target, err := n.Plugins.Target("hung")
	if err != nil {
		t.Fatal(err)
	}
	err = target.Validate(map[string]any{})
	if plugin.AsUndecided(err) == nil || !strings.Contains(err.Error(), "within 1s") {
		t.Fatalf("validate of a hung plugin with plugins.validate_timeout 1s: %v, want no verdict (503) naming within 1s", err)
	}
}

// The server runs with what CheckSetup checked: Open given its Setup does
// not read the governance policy again (it compiles once at start), so a
// file changed between the check and the start cannot slip past the check.
func TestOpenRunsWhatWasChecked(t *testing.T) {
	dir := t.TempDir()
	policy, err := os.ReadFile(filepath.Join("..", "governance", "testdata", "policy.rego"))
	if err != nil {
		t.Fatal(err)
	}
	rego := filepath.Join(dir, "policy.rego")
	if err := os.WriteFile(rego, policy, 0o600); err != nil {
		t.Fatal(err)
	}
	open := func(setup *node.Setup) error {
		cfg := servertest.Config(filepath.Join(dir, "data"))
		cfg.Governance.Rego = rego
		n, err := node.Open(context.Background(), cfg, node.Options{Plugins: builtin.Register, Setup: setup})
		if err == nil {
			n.Close(0)
		}
		return err
	}
	cfg := servertest.Config(filepath.Join(dir, "data"))
	cfg.Governance.Rego = rego
	setup, err := node.CheckSetup(cfg, builtin.Register)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rego, []byte("package manent.governance\n\ndecision := {\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := open(setup); err != nil {
		t.Fatalf("Open read the policy again: %v", err)
	}
	// Without a Setup, Open builds it: the broken file is its mistake.
	if err := open(nil); !node.IsConfigError(err) {
		t.Fatalf("got %v, want the broken policy's configuration error", err)
	}
}
