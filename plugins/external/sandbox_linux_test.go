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

// A descriptor's with.env may not change how the operators' executable
// starts: LD_PRELOAD of a library the artifact shipped, a PATH leading to
// its programs, a bash function exported as BASH_FUNC_cat%% or a protocol
// variable of another deploy ran the submitter's code as the server's
// user (or the plugin on another application's behalf) on a server whose
// plugins.steps lists this plugin and not script. Refused before the
// executable runs, at validate (a setting error at with.env.<NAME>) and at
// every action.
func TestWithEnvCannotTakeOverThePlugin(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	path := writeScript(t, dir, "manent-plugin-marker", "echo \"$MANENT_ACTION\" >> "+ran+"\necho '{\"ok\": true}'\n", 0o755)
	p := &external.Plugin{Name: "marker", Path: path}
	for _, name := range []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "PATH", "HOME", "BASH_ENV", "BASH_FUNC_cat%%", "PYTHONPATH", "NODE_OPTIONS", "PERL5OPT", "MANENT_APPLICATION"} {
		with := map[string]any{"env": map[string]any{name: dir + "/evil", "REGION": "eu-west-1"}}
		err := p.Validate(with)
		ses := plugin.SettingErrors(err)
		if len(ses) != 1 || ses[0].Path != plugin.SettingPath("env", name) || !strings.Contains(err.Error(), "with.env."+name) {
			t.Errorf("validate with.env.%s: %v (setting errors %v), want one refusal at env/%s", name, err, ses, name)
		}
		pc := plugin.Context{DeployID: "dpl_1", Application: "billing", Environment: "prod", Version: "2", Step: "smoke",
			WorkDir: dir, With: with, Log: &bytes.Buffer{}}
		if _, err := p.Run(context.Background(), pc); err == nil || !plugin.IsPermanent(err) || !strings.Contains(err.Error(), "with.env."+name) {
			t.Errorf("run with with.env.%s: %v, want a permanent refusal naming it", name, err)
		}
		if _, err := p.Deploy(context.Background(), pc); err == nil || !plugin.IsPermanent(err) {
			t.Errorf("deploy with with.env.%s: %v, want a permanent refusal", name, err)
		}
	}
	if b, err := os.ReadFile(ran); err == nil {
		t.Fatalf("the executable ran (actions %q): a refused with.env must stop it before it starts", strings.Fields(string(b)))
	}
	// Other names are the plugin's to read, as before.
	if err := p.Validate(map[string]any{"env": map[string]any{"REGION": "eu-west-1", "LANG": "C.UTF-8"}}); err != nil {
		t.Fatalf("validate with an ordinary with.env: %v", err)
	}
	if got := read(t, ran); got != "validate" {
		t.Fatalf("actions run %q, want the one validate", got)
	}
}
