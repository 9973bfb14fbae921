package servercmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A relative path in the configuration file is read from the file's
// directory, whatever the working directory (under systemd it is /): every
// path-valued key alike. A relative path given as a flag or in the
// environment is read from the working directory, as a shell means it.
func TestRelativePathsInTheConfigFile(t *testing.T) {
	etc := t.TempDir()
	t.Chdir(t.TempDir())
	path := filepath.Join(etc, "manent-server.yaml")
	cfg := `data_dir: data
database: sqlite:db/manent.db?busy_timeout=5s
governance: {rules: governance.yaml}
environments: {provider: files, dir: envs}
plugins:
  path: [plugins, /opt/manent/plugins]
  local: {root: targets}
  kubernetes: {kubeconfigs: [kube/prod.yaml, {path: kube/dev.yaml, environments: [dev]}]}
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := loadConfig(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := func(p string) string { return filepath.Join(etc, p) }
	for _, x := range []struct{ key, got, want string }{
		{"data_dir", c.DataDir, in("data")},
		{"database", c.Database, "sqlite:" + in("db/manent.db") + "?busy_timeout=5s"},
		{"governance.rules", c.Governance.Rules, in("governance.yaml")},
		{"environments.dir", c.Environments.Dir, in("envs")},
		{"plugins.local.root", c.Plugins.Local.Root, in("targets")},
	} {
		if x.got != x.want {
			t.Errorf("%s = %q, want %q", x.key, x.got, x.want)
		}
	}
	if want := []string{in("plugins"), "/opt/manent/plugins"}; !slices.Equal(c.Plugins.Path, want) {
		t.Errorf("plugins.path = %q, want %q", c.Plugins.Path, want)
	}
	var kubeconfigs []string
	for _, k := range c.Kubeconfigs() {
		kubeconfigs = append(kubeconfigs, k.Path)
	}
	if want := []string{in("kube/prod.yaml"), in("kube/dev.yaml")}; !slices.Equal(kubeconfigs, want) {
		t.Errorf("plugins.kubernetes.kubeconfigs = %q, want %q", kubeconfigs, want)
	}

	// Flags and the environment: the working directory.
	wd, _ := os.Getwd()
	t.Setenv("MANENT_DATA_DIR", "here")
	c, err = loadConfig(path, map[string]string{"database": "sqlite:here.db"})
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != filepath.Join(wd, "here") || c.Database != "sqlite:"+filepath.Join(wd, "here.db") {
		t.Errorf("data_dir %q, database %q: want them in the working directory %s", c.DataDir, c.Database, wd)
	}
	c, err = loadConfig(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Database != "sqlite:"+in("db/manent.db")+"?busy_timeout=5s" {
		t.Errorf("database %q: the file's, from its directory", c.Database)
	}
}

// A missing governance rules file is named by its absolute path, not as
// written ("open governance.yaml: no such file or directory" hid where the
// server looked).
func TestMissingRulesFileNamesThePathTried(t *testing.T) {
	etc := t.TempDir()
	t.Chdir(t.TempDir())
	path := filepath.Join(etc, "manent-server.yaml")
	if err := os.WriteFile(path, []byte("governance: {rules: governance.yaml}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), []string{"serve", "--config", path, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}, &stdout, &stderr, nil)
	if code != 2 || !strings.Contains(stderr.String(), filepath.Join(etc, "governance.yaml")) {
		t.Fatalf("exit %d, stderr %q; want 2 naming %s", code, stderr.String(), filepath.Join(etc, "governance.yaml"))
	}
}

// A configuration that relied on the old reading (relative to the working
// directory) must not start a server on a new, empty database beside the
// file while its data sits where it was: it is refused, naming both.
func TestRelativeDataDirMovedByTheNewRule(t *testing.T) {
	etc := t.TempDir()
	wd := t.TempDir()
	t.Chdir(wd)
	if err := os.MkdirAll(filepath.Join(wd, "data"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wd, "data", "manent.db"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(etc, "manent-server.yaml")
	if err := os.WriteFile(path, []byte("data_dir: data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadConfig(path, nil)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(wd, "data", "manent.db")) || !strings.Contains(err.Error(), filepath.Join(etc, "data")) {
		t.Fatalf("got %v; want a refusal naming the old database and the new data_dir", err)
	}
}
