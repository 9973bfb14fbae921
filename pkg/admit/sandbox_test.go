package admit_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/admit"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/local"
)

// fieldErrors admits extra as a dry run and returns its field errors by
// path (nil when admitted).
func (f *fixture) fieldErrors(t *testing.T, extra string) map[string]string {
	t.Helper()
	_, err := f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, extra), Identity: ci, DryRun: true})
	if err == nil {
		return nil
	}
	var me *manent.Error
	if !errors.As(err, &me) || me.Code != manent.EInvalid {
		t.Fatalf("got %v, want a 422", err)
	}
	out := map[string]string{}
	for _, fe := range me.Fields {
		out[fe.Path] = fe.Message
	}
	return out
}

// In a configured server custom steps use only the plugins of
// plugins.steps (none by default): a step naming another one is refused
// with a 422 naming the step (SPEC §11.1). Local trial mode allows every
// plugin.
func TestStepPluginsAllowList(t *testing.T) {
	step := "steps:\n  - {name: dump-env, after: deploy, plugin: script, with: {command: [env]}}\n"
	none := newAdmitter(t, admit.Config{})
	target := "target: {plugin: local, with: {dir: " + filepath.Join(none.dir, "targets", "billing") + "}}\n"
	got := none.fieldErrors(t, target+step)
	if msg := got["/steps/0/plugin"]; !strings.Contains(msg, "dump-env") || !strings.Contains(msg, `"script" is not allowed`) || len(got) != 1 {
		t.Fatalf("field errors %v: want /steps/0/plugin naming step dump-env and plugin script only", got)
	}

	allowed := newAdmitter(t, admit.Config{StepPlugins: []string{"script"}})
	target = "target: {plugin: local, with: {dir: " + filepath.Join(allowed.dir, "targets", "billing") + "}}\n"
	if got := allowed.fieldErrors(t, target+step); got != nil {
		t.Fatalf("plugins.steps [script]: refused %v", got)
	}
	if got := allowed.fieldErrors(t, target+"steps:\n  - {name: call, after: deploy, plugin: cluster-ready}\n"); !strings.Contains(got["/steps/0/plugin"], "plugins.steps: script") {
		t.Fatalf("plugins.steps [script], a cluster-ready step: %v, want refused", got)
	}

	trial := newAdmitter(t, admit.Config{Trial: true})
	if got := trial.fieldErrors(t, step); got != nil {
		t.Fatalf("local trial mode: refused %v", got)
	}

	// The config step applies the list valid when the deploy starts.
	adm, err := allowed.a.Admit(context.Background(), admit.Request{Descriptor: allowed.descriptor(t, target+step), Identity: ci})
	if err != nil {
		t.Fatal(err)
	}
	_, err = none.a.Reconfigure(context.Background(), adm.Input)
	if err == nil || !plugin.IsPermanent(err) || !strings.Contains(err.Error(), "dump-env") {
		t.Fatalf("config step on a server without plugins.steps: %v, want a permanent refusal naming the step", err)
	}
}

// A descriptor cannot get round plugins.steps by naming script as its
// target: in a configured server without script in plugins.steps, a
// target script is refused at /target/plugin; with script listed, or in
// local trial mode, it is admitted.
func TestScriptTargetFollowsStepPlugins(t *testing.T) {
	target := "target: {plugin: script, with: {command: [sh, -c, 'cat /proc/$PPID/environ']}}\n"
	none := newAdmitter(t, admit.Config{})
	got := none.fieldErrors(t, target)
	if msg := got["/target/plugin"]; !strings.Contains(msg, `target "script" runs the commands`) || !strings.Contains(msg, "plugins.steps") || len(got) != 1 {
		t.Fatalf("field errors %v: want only /target/plugin refusing the script target", got)
	}
	if got := newAdmitter(t, admit.Config{StepPlugins: []string{"script"}}).fieldErrors(t, target); got != nil {
		t.Fatalf("plugins.steps [script]: refused %v", got)
	}
	if got := newAdmitter(t, admit.Config{Trial: true}).fieldErrors(t, target); got != nil {
		t.Fatalf("local trial mode: refused %v", got)
	}
}

// A name in plugins.steps that is no step plugin stops the server.
func TestStepPluginsUnknown(t *testing.T) {
	_, err := admit.New(admit.Config{Store: newAdmitterStore(t), Plugins: plugin.NewRegistry(), StepPlugins: []string{"scirpt"}})
	if err == nil || !strings.Contains(err.Error(), `plugins.steps[0]: unknown step plugin "scirpt"`) {
		t.Fatalf("got %v, want a configuration error naming plugins.steps[0]", err)
	}
}

// The local target writes only under plugins.local.root: a with.dir outside
// it — directly, through `..` or through a symbolic link — is a 422
// (SPEC §11.1).
func TestLocalRoot(t *testing.T) {
	f := newAdmitter(t, admit.Config{})
	root := filepath.Join(f.dir, "targets")
	outside := filepath.Join(f.dir, "elsewhere")
	for _, d := range []string{root, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(root, "slash")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "billing"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "billing"), filepath.Join(root, "alias")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dir, want string // want: "" admitted, else a fragment of /target/with
	}{
		{filepath.Join(root, "billing", "prod"), ""},
		{root, ""},
		{filepath.Join(root, "alias", "prod"), ""}, // a link that stays inside
		{filepath.Join(root, "new", "deeper", "prod"), ""},
		{outside, "outside this server's local root"},
		{"/etc/manent", "outside this server's local root"},
		{root + "-sibling/prod", "outside this server's local root"},
		{root + "/../elsewhere", `must not contain ".."`},
		{root + "/billing/../../elsewhere", `must not contain ".."`},
		{root + "/billing/..", `must not contain ".."`},
		{filepath.Join(root, "escape"), "leads to " + outside},
		{filepath.Join(root, "escape", "prod"), "leads to " + filepath.Join(outside, "prod")},
		{filepath.Join(root, "slash", "etc"), "leads to /etc"},
		{"relative/prod", "must be an absolute path"},
	}
	for _, tt := range tests {
		got := f.fieldErrors(t, "target: {plugin: local, with: {dir: \""+tt.dir+"\"}}\n")
		switch {
		case tt.want == "" && got != nil:
			t.Errorf("dir %s: refused %v", tt.dir, got)
		case tt.want != "" && (!strings.Contains(got["/target/with/dir"], tt.want) || strings.Contains(got["/target/with/dir"], "local: local:")):
			t.Errorf("dir %s: %v, want /target/with/dir with %q (the plugin named once)", tt.dir, got, tt.want)
		}
	}
}

// A descriptor's secret may not name a variable the server keeps to itself
// — MANENT_* (MANENT_BOOTSTRAP_TOKEN, MANENT_DATABASE), callbacks.secret_env,
// itsm.token_env — nor, when secrets.files_under is set, a file outside
// those directories: the secrets step's error would tell any submitter
// whether it is set or exists on the worker. Each is a 422 at the
// secret's path, for a dry run too; other names and paths are admitted.
func TestSecretsTheServerKeepsRefused(t *testing.T) {
	f := newAdmitter(t, admit.Config{Trial: true,
		ServerEnv:        map[string]string{"HOOK_KEY": "callbacks.secret_env", "ITSM_TOKEN": "itsm.token_env"},
		SecretFilesUnder: []string{"/etc/manent/secrets"}})
	got := f.fieldErrors(t, `secrets:
  BOOT: env:MANENT_BOOTSTRAP_TOKEN
  DB: env:MANENT_DATABASE
  HOOK: env:HOOK_KEY
  CHANGE: env:ITSM_TOKEN
  "a/b": file:/etc/shadow
  UP: file:/etc/manent/secrets/../../shadow
  REL: file:secrets/key
  NEAR: file:/etc/manent/secrets-old/key
  OK_ENV: env:BILLING_DB_PASSWORD
  OK_FILE: file:/etc/manent/secrets/billing/tls.key
`)
	want := map[string]string{
		"/secrets/BOOT":   "MANENT_",
		"/secrets/DB":     "MANENT_",
		"/secrets/HOOK":   "callbacks.secret_env",
		"/secrets/CHANGE": "itsm.token_env",
		"/secrets/a~1b":   "secrets.files_under",
		"/secrets/UP":     "secrets.files_under",
		"/secrets/REL":    "absolute",
		"/secrets/NEAR":   "secrets.files_under",
	}
	for path, frag := range want {
		if !strings.Contains(got[path], frag) {
			t.Errorf("%s: %q, want a refusal naming %q", path, got[path], frag)
		}
	}
	if len(got) != len(want) {
		t.Errorf("refusals %v, want exactly %d (OK_ENV and OK_FILE admitted)", got, len(want))
	}

	// Without secrets.files_under any path is admitted; the server's
	// variables are refused all the same.
	open := newAdmitter(t, admit.Config{Trial: true})
	if got := open.fieldErrors(t, "secrets: {K: file:/etc/shadow, L: file:rel/key}\n"); got != nil {
		t.Errorf("no secrets.files_under: %v, want every path admitted", got)
	}
	if got := open.fieldErrors(t, "secrets: {K: env:MANENT_BOOTSTRAP_TOKEN}\n"); !strings.Contains(got["/secrets/K"], "MANENT_") {
		t.Errorf("env:MANENT_BOOTSTRAP_TOKEN: %v, want a refusal at /secrets/K", got)
	}
}

// A local target directory another application or environment deploys
// into (its <dir>/.manent-owner) is a 422 at /target/with/dir naming the
// owner, before anything runs; its owner's deploys and a new directory
// are admitted.
func TestLocalDirOfAnotherEnvironment(t *testing.T) {
	f := newAdmitter(t, admit.Config{})
	shared := filepath.Join(f.dir, "targets", "shared")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared, local.OwnerFile), []byte(`{"application":"billing","environment":"staging"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := f.fieldErrors(t, "target: {plugin: local, with: {dir: \""+shared+"\"}}\n")
	t.Log(got)
	if msg := got["/target/with/dir"]; !strings.Contains(msg, `application "billing" environment "staging"`) || !strings.Contains(msg, local.OwnerFile) || strings.Contains(msg, "local: local:") {
		t.Errorf("billing/prod into billing/staging's directory: %v, want /target/with/dir naming the owner and its file", got)
	}
	if err := os.WriteFile(filepath.Join(shared, local.OwnerFile), []byte(`{"application":"billing","environment":"prod"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := f.fieldErrors(t, "target: {plugin: local, with: {dir: \""+shared+"\"}}\n"); got != nil {
		t.Errorf("billing/prod into its own directory: refused %v", got)
	}
	if got := f.fieldErrors(t, "target: {plugin: local, with: {dir: \""+filepath.Join(f.dir, "targets", "new")+"\"}}\n"); got != nil {
		t.Errorf("a new directory: refused %v", got)
	}
}

// On a configured server a descriptor's env: secret may name only the
// variables the operators allowed (secrets.env, else plugins.pass_env):
// any other name is a 422 at the secret's path, the same words whether
// the variable is set on the worker or not — the secrets step told a
// submitter which of the worker's variables exist. The config step
// applies the list valid when the deploy starts. Local trial mode allows
// any variable but the server's own.
func TestEnvSecretsOnlyFromTheAllowList(t *testing.T) {
	t.Setenv("PROBE_SET", "x")
	f := newAdmitter(t, admit.Config{SecretEnv: []string{"BILLING_DB_PASSWORD", "APP_*"}, SecretEnvFrom: "secrets.env"})
	target := "target: {plugin: local, with: {dir: " + filepath.Join(f.dir, "targets", "billing") + "}}\n"
	got := f.fieldErrors(t, target+`secrets:
  SET: env:PROBE_SET
  UNSET: env:PROBE_UNSET
  NEAR: env:APPX
  OK: env:BILLING_DB_PASSWORD
  PREFIXED: env:APP_KEY
`)
	if len(got) != 3 {
		t.Fatalf("refusals %v, want exactly /secrets/SET, /secrets/UNSET and /secrets/NEAR", got)
	}
	set, unset := got["/secrets/SET"], got["/secrets/UNSET"]
	if !strings.Contains(set, "secrets.env: BILLING_DB_PASSWORD, APP_*") || !strings.Contains(got["/secrets/NEAR"], "env:APPX") {
		t.Errorf("refusals %v: want them to name secrets.env and its list", got)
	}
	if strings.ReplaceAll(set, "SET: env:PROBE_SET", "NAME") != strings.ReplaceAll(unset, "UNSET: env:PROBE_UNSET", "NAME") {
		t.Errorf("a set variable is refused with %q, an unset one with %q: the refusal tells which exists", set, unset)
	}

	none := newAdmitter(t, admit.Config{SecretEnvFrom: "plugins.pass_env (secrets.env unset)"})
	target = "target: {plugin: local, with: {dir: " + filepath.Join(none.dir, "targets", "billing") + "}}\n"
	if got := none.fieldErrors(t, target+"secrets: {K: env:PROBE_SET}\n"); !strings.Contains(got["/secrets/K"], "plugins.pass_env (secrets.env unset): none") {
		t.Errorf("no list: %v, want a refusal at /secrets/K naming plugins.pass_env", got)
	}

	// The config step refuses a deploy admitted under a wider list.
	wide := newAdmitter(t, admit.Config{SecretEnv: []string{"*"}})
	target = "target: {plugin: local, with: {dir: " + filepath.Join(wide.dir, "targets", "billing") + "}}\n"
	adm, err := wide.a.Admit(context.Background(), admit.Request{Descriptor: wide.descriptor(t, target+"secrets: {K: env:PROBE_SET}\n"), Identity: ci})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := none.a.Reconfigure(context.Background(), adm.Input); err == nil || !plugin.IsPermanent(err) || !strings.Contains(err.Error(), "/secrets/K") {
		t.Fatalf("config step without the variable allowed: %v, want a permanent refusal at /secrets/K", err)
	}

	trial := newAdmitter(t, admit.Config{Trial: true})
	if got := trial.fieldErrors(t, "secrets: {K: env:PROBE_SET}\n"); got != nil {
		t.Errorf("local trial mode: refused %v", got)
	}
}
