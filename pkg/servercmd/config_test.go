package servercmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// MANENT_DATABASE configures the database (the Helm chart passes the DSN
// so, from a Secret, never as an argument); --database wins over it.
func TestDatabaseFromEnvironment(t *testing.T) {
	const dsn = "postgres://manent:secret@db.internal:5432/manent"
	t.Setenv("MANENT_DATABASE", dsn)
	c, err := loadConfig("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Database != dsn {
		t.Fatalf("database %q, want %q from MANENT_DATABASE", c.Database, dsn)
	}
	c, err = loadConfig("", map[string]string{"database": "sqlite:/tmp/x.db"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Database != "sqlite:/tmp/x.db" {
		t.Fatalf("database %q, want the flag's", c.Database)
	}
}

// A key manent does not know is a configuration error naming it (exit 2),
// not silently ignored: a typo in rbac:, plugins.pass_env: or
// governance: would otherwise run a server without that setting.
func TestUnknownConfigKeyIsAnError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "manent-server.yaml")
	cfg := "listen: 127.0.0.1:0\nrback:\n  - {subjects: [\"token:ci\"], permissions: [admin]}\nplugins: {pass_evn: [HTTPS_PROXY]}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadConfig(path, nil)
	if err == nil || !strings.Contains(err.Error(), path+`:2:1: unknown key "rback" (did you mean "rbac"?)`) ||
		!strings.Contains(err.Error(), path+`:4:11: unknown key "pass_evn" in plugins (did you mean "pass_env"?)`) {
		t.Fatalf("got %v, want an error naming rback and plugins.pass_evn", err)
	}
	var stdout, stderr bytes.Buffer
	if code := Run(context.Background(), []string{"serve", "--config", path, "--data-dir", dir}, &stdout, &stderr, nil); code != 2 {
		t.Fatalf("manent-server serve exit %d (stderr %q), want 2 for a configuration error", code, stderr.String())
	}
	// Every documented key still loads.
	good := "listen: 127.0.0.1:0\nworkers: {slots: 2, heartbeat: 5s, dead_after: 30s}\nrbac:\n  - {subjects: [\"token:ci\"], permissions: [admin], applications: [\"*\"], environments: [\"*\"]}\n" +
		"plugins: {steps: [script], pass_env: [HTTPS_PROXY], local: {root: /srv}}\nschedules: {min_interval: 1m}\nretention: {workflows: 168h, every: 10m}\n"
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(path, nil); err != nil {
		t.Fatalf("a configuration of known keys: %v", err)
	}
}

// Every key is a MANENT_* variable, as operations.md says: one the file
// leaves out and that has no default is read too — a list of strings
// comma-separated — and one that holds mappings is refused, saying to
// write it in the file. Both were silently ignored: an operator who set
// MANENT_PLUGINS_PASS_ENV or MANENT_PLUGINS_KUBERNETES_KUBECONFIGS saw
// the server start without them.
func TestEveryKeyIsAVariable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "manent-server.yaml")
	if err := os.WriteFile(file, []byte("listen: 127.0.0.1:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MANENT_PLUGINS_PASS_ENV", "AWS_REGION, TZ")
	t.Setenv("MANENT_TRUSTED_PROXIES", "10.0.0.0/8")
	t.Setenv("MANENT_PLUGINS_VALIDATE_TIMEOUT", "3s")
	cfg, err := loadConfig(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Plugins.PassEnv, ","); got != "AWS_REGION,TZ" {
		t.Errorf("plugins.pass_env %q from MANENT_PLUGINS_PASS_ENV, want AWS_REGION,TZ", got)
	}
	if cfg.Plugins.ValidateTimeout != 3*time.Second {
		t.Errorf("plugins.validate_timeout %s from MANENT_PLUGINS_VALIDATE_TIMEOUT, want 3s", cfg.Plugins.ValidateTimeout)
	}
	if got := strings.Join(cfg.TrustedProxies, ","); got != "10.0.0.0/8" {
		t.Errorf("trusted_proxies %q from MANENT_TRUSTED_PROXIES, want 10.0.0.0/8", got)
	}

	t.Setenv("MANENT_PLUGINS_KUBERNETES_KUBECONFIGS", "/etc/manent/kube/prod.yaml")
	_, err = loadConfig(file, nil)
	if err == nil || !strings.Contains(err.Error(), "MANENT_PLUGINS_KUBERNETES_KUBECONFIGS") || !strings.Contains(err.Error(), "write it in the configuration file") {
		t.Fatalf("MANENT_PLUGINS_KUBERNETES_KUBECONFIGS: %v, want a refusal saying to write the key in the file", err)
	}
}
