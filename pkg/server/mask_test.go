package server_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/envconfig"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// leakyPlugin is an external plugin that prints $API_TOKEN on stderr and
// answers with it: in its output (MODE=ok) or its error (MODE=fail).
const leakyPlugin = `#!/bin/sh
cat >/dev/null
if [ "$MANENT_ACTION" = validate ]; then echo '{"ok": true}'; exit 0; fi
echo "plugin stderr: $API_TOKEN" >&2
if [ "$MODE" = fail ]; then
  printf '{"ok": false, "error": "login refused for %s", "permanent": true}\n' "$API_TOKEN"
else
  printf '{"ok": true, "output": {"token": "%s", "note": "kept"}}\n' "$API_TOKEN"
fi
`

// A step that prints the secrets it is given — its with.env credentials,
// the environment configuration's, plugins.pass_env's — writes "***" in
// their place in every place a reader of the deploy sees: its log (whole
// lines, a secret written in two pieces, each line of a multi-line one),
// its steps' errors and outputs, the deploy's error, the event stream and
// the callbacks. A value shorter than 4 characters is not masked, and the
// config step says so.
func TestSecretsAStepPrintsAreMasked(t *testing.T) {
	const (
		dbPassword = "db-pw-7f3a91"             // the environment configuration's target.with.env
		apiToken   = "tok-5be1c9d2"             // a custom step's with.env
		passEnv    = "pass-env-value-42"        // plugins.pass_env
		keyLine1   = "first-key-line-a1b2"      // a multi-line PRIVATE_KEY
		keyLine2   = "second-key-line-c3d4"     //
		short      = "ab1"                      // too short to be masked
		urlPW      = "url-pw-99e1"              // the password of a URL setting
		cbSecret   = "MASKTEST_CALLBACK_SECRET" // the callback signing secret's variable
	)
	t.Setenv("MASKTEST_PASS", passEnv)
	t.Setenv(cbSecret, "whsec_"+base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")))

	var (
		mu        sync.Mutex
		callbacks []string
		finished  = make(chan struct{})
		once      sync.Once
	)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		callbacks = append(callbacks, string(b))
		mu.Unlock()
		if strings.Contains(string(b), `"type":"finished"`) {
			once.Do(func() { close(finished) })
		}
	}))
	defer cb.Close()

	envDir, pluginDir := t.TempDir(), t.TempDir()
	env := fmt.Sprintf(`target:
  plugin: script
  with:
    command: [sh, -c, 'echo "db password: $DB_PASSWORD"']
    env: {DB_PASSWORD: %s}
`, dbPassword)
	if err := os.WriteFile(filepath.Join(envDir, "staging.yaml"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pluginDir, "manent-plugin-leaky"), []byte(leakyPlugin), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := newTestServer(t, enginetest.SQLite(t), []auth.TokenConfig{{Name: "reader", SHA256: auth.HashToken("reader-token")}},
		[]auth.RBACRule{{Subjects: []string{"token:reader"}, Permissions: []string{"deployment.read"}}},
		func(c *node.Config) {
			configured(c)
			c.Plugins.Steps = []string{"script", "leaky"}
			c.Plugins.Path = []string{pluginDir}
			c.Plugins.PassEnv = []string{"MASKTEST_PASS"}
			c.Environments = envconfig.Settings{Provider: "files", Dir: envDir}
			c.Callbacks.Allow = []string{cb.URL + "/**"}
			c.Callbacks.SecretEnv = cbSecret
		})
	admin := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()

	// The echo step writes the token in two pieces (two writes of one
	// line), each line of the key, the pass_env value on stderr, the URL
	// password and the short one.
	echo := `printf 'token: %s' "${API_TOKEN%%-*}-"; printf '%s\n' "${API_TOKEN#*-}"; ` +
		`echo "key:"; echo "$PRIVATE_KEY"; echo "pass: $MASKTEST_PASS" >&2; echo "url: $UPSTREAM"; echo "short: $SHORT_PASSWORD"`
	desc := fmt.Sprintf(`apiVersion: manent/v1
application: billing
environment: staging
version: "7"
artifact: {url: %q}
callbacks: [{url: %q}]
steps:
  - name: echo
    before: deploy
    plugin: script
    with:
      command: [sh, -c, %q]
      env:
        API_TOKEN: %s
        PRIVATE_KEY: "%s\n%s\n"
        UPSTREAM: "https://svc:%s@upstream.example/x"
        SHORT_PASSWORD: %s
  - name: answer
    after: echo
    plugin: leaky
    with: {env: {API_TOKEN: %s, MODE: ok}}
  - name: refuse
    after: activation
    plugin: leaky
    with: {env: {API_TOKEN: %s, MODE: fail}}
`, artifactFile(t), cb.URL+"/hook", echo, apiToken, keyLine1, keyLine2, urlPW, short, apiToken, apiToken)

	res, err := admin.Submit(ctx, []byte(desc), false)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	d, err := admin.Wait(wctx, res.ID, 50*time.Millisecond)
	if err != nil || d.State != manent.StateError {
		t.Fatalf("deploy: %v %+v: want ERROR from the refuse step", err, d)
	}

	get := func(path string) string { return shownTo(t, srv.URL, "reader-token", path) }
	shown := map[string]string{
		"status": get("/api/v1/deployments/" + res.ID),
		"steps":  get("/api/v1/deployments/" + res.ID + "/steps"),
		"logs":   get("/api/v1/deployments/" + res.ID + "/logs"),
		"events": get("/api/v1/deployments/" + res.ID + "/events"),
		"list":   get("/api/v1/deployments?application=billing"),
	}
	// The callbacks of every step and of the end: the finished one last.
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("no finished callback within 30 s")
	}
	mu.Lock()
	shown["callbacks"] = strings.Join(callbacks, "\n")
	mu.Unlock()

	for where, body := range shown {
		for _, secret := range []string{dbPassword, apiToken, "5be1c9d2", passEnv, keyLine1, keyLine2, urlPW} {
			if strings.Contains(body, secret) {
				t.Errorf("%s shows the secret %q:\n%s", where, secret, body)
			}
		}
	}
	logs := shown["logs"]
	for _, want := range []string{"token: ***", "db password: ***", "pass: ***", "plugin stderr: ***",
		"url: https://svc:***@upstream.example/x", "short: " + short,
		"not masked in this deploy's log, errors and outputs (shorter than 4 characters, or past 256 KiB of secrets): steps.echo.with.env.SHORT_PASSWORD"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log has no %q:\n%s", want, logs)
		}
	}
	if !strings.Contains(shown["steps"], `"token":"***"`) || !strings.Contains(shown["steps"], `"note":"kept"`) {
		t.Errorf("the answer step's output should show the token masked and the rest:\n%s", shown["steps"])
	}
	if !strings.Contains(shown["status"], "login refused for ***") || !strings.Contains(shown["callbacks"], "login refused for ***") {
		t.Errorf("the deploy's error should name the refusal, masked:\nstatus %s\ncallbacks %s", shown["status"], shown["callbacks"])
	}
}

// Masking tells a step nothing it was not given: a custom step (the
// submitter's code) that prints guesses of a credential the environment
// configuration gives only the target sees its guesses as printed — were
// the right one masked, a loop over a weak password's candidates would
// find it. The target, which is given it, has it masked.
func TestMaskingIsNoOracle(t *testing.T) {
	t.Parallel()
	const pin = "4711-0815"
	envDir := t.TempDir()
	env := fmt.Sprintf(`target:
  plugin: script
  with:
    command: [sh, -c, 'echo "target: $DB_PASSWORD"']
    env: {DB_PASSWORD: %s}
`, pin)
	if err := os.WriteFile(filepath.Join(envDir, "staging.yaml"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil, func(c *node.Config) {
		configured(c)
		c.Environments = envconfig.Settings{Provider: "files", Dir: envDir}
	})
	admin := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	guess := `for p in 4711-0814 4711-0815 4711-0816; do echo "guess $p"; done`
	desc := fmt.Sprintf(`apiVersion: manent/v1
application: billing
environment: staging
version: "7"
artifact: {url: %q}
steps:
  - {name: guess, before: deploy, plugin: script, with: {command: [sh, -c, %q]}}
`, artifactFile(t), guess)
	res, err := admin.Submit(ctx, []byte(desc), false)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if d, err := admin.Wait(wctx, res.ID, 50*time.Millisecond); err != nil || d.State != manent.StateSuccess {
		t.Fatalf("deploy: %v %+v", err, d)
	}
	logs, err := admin.Logs(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range logs.Lines {
		got = append(got, l.Step+": "+l.Text)
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"guess: guess 4711-0814", "guess: guess 4711-0815", "guess: guess 4711-0816", "deploy: target: ***"} {
		if !strings.Contains(all, want) {
			t.Errorf("the log has no %q:\n%s", want, all)
		}
	}
}

// A credential the environment's configuration changes while a deploy
// waits in the queue is masked with the value its steps are given: the
// config step reads the configuration again, and the steps after it mask
// with what it read, not with what the submission read.
func TestCredentialChangedBeforeConfigStepIsMasked(t *testing.T) {
	t.Parallel()
	const before, after = "queued-pw-0a1b2c", "rotated-pw-3d4e5f"
	envFile := func(pw string) string {
		return fmt.Sprintf("target:\n  plugin: script\n  with:\n    command: [sh, -c, 'echo \"db password: $DB_PASSWORD\"']\n    env: {DB_PASSWORD: %s}\n", pw)
	}
	ci, _, envDir := credsServer(t, map[string]string{"staging.yaml": envFile(before)})
	ctx := context.Background()
	// The first deploy holds staging's queue until its gate opens.
	_, gate := startGated(t, ci, func(art, gate string) string { return gatedDescriptor(art, "staging", gate) })
	desc := fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: staging\nversion: \"7\"\nartifact: {url: %q}\n", artifactFile(t))
	res, err := ci.Submit(ctx, []byte(desc), false)
	if err != nil {
		t.Fatal(err)
	}
	writeEnvFile(t, envDir, "staging.yaml", envFile(after))
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	state, log := deployLog(t, ci, res.ID)
	if state != manent.StateSuccess {
		t.Fatalf("deploy %s:\n%s", state, log)
	}
	if strings.Contains(log, after) || !strings.Contains(log, "db password: ***") {
		t.Errorf("the rotated password should be masked in the deploy's log:\n%s", log)
	}
}
