package external_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/external"
)

// An external plugin starts from an empty environment, as a script does
// (SPEC §11.1): PATH, HOME, LANG, TZ, the MANENT_* variables of the
// protocol, plugins.pass_env, with.env — no server secret.
func TestEnvironmentStartsEmpty(t *testing.T) {
	t.Setenv("MANENT_BOOTSTRAP_TOKEN", "admin-secret-1")
	t.Setenv("ITSM_TOKEN", "itsm-secret-2")
	t.Setenv("PASSED", "from-server")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("TZ", "UTC")
	dir := t.TempDir()
	dump := filepath.Join(dir, "environ")
	path := writeScript(t, dir, "manent-plugin-envdump", `tr '\0' '\n' < /proc/$$/environ > `+dump+"\necho '{\"ok\": true}'\n", 0o755)
	p := &external.Plugin{Name: "envdump", Path: path, PassEnv: []string{"PASSED"}}
	pc := plugin.Context{DeployID: "dpl_1", Application: "billing", Environment: "prod", Version: "2", Step: "smoke",
		WorkDir: dir, With: map[string]any{"env": map[string]any{"FROM_WITH": "yes"}}, Log: &bytes.Buffer{}}
	if _, err := p.Run(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
	var names []string
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(read(t, dump)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		names = append(names, k)
		got[k] = v
	}
	sort.Strings(names)
	want := []string{"FROM_WITH", "LANG", "MANENT_ACTION", "MANENT_APPLICATION", "MANENT_ARTIFACT", "MANENT_DEPLOY_ID",
		"MANENT_ENVIRONMENT", "MANENT_PLUGIN_PROTOCOL", "MANENT_STEP", "MANENT_VERSION", "MANENT_WORKDIR", "PASSED", "PATH", "TZ"}
	if _, ok := os.LookupEnv("HOME"); ok {
		want = append(want, "HOME")
		sort.Strings(want)
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("the plugin's environment has\n %v\nwant\n %v", names, want)
	}
	if got["MANENT_ACTION"] != "run" || got["PASSED"] != "from-server" || got["MANENT_DEPLOY_ID"] != "dpl_1" {
		t.Fatalf("environment %v", got)
	}
}
