package main_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// The trust boundary of SPEC §11.1, tried as an attacker holding a token
// that may submit deploys of one application: its custom step dumps its
// environment, and the server's secrets — the bootstrap admin token, the
// callback signing secret, the ITSM token, a database DSN — show up in no
// log line, event, step output, database row or server log. Custom steps
// use only plugins.steps, and the local target writes only under
// plugins.local.root.
func TestStepSandbox(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	dbFile := filepath.Join(dir, "manent.db")
	db := "sqlite:" + dbFile
	secrets := map[string]string{
		"MANENT_BOOTSTRAP_TOKEN": "bootstrap-s3cret-7c1e",
		"TEST_CALLBACK_SECRET":   "whsec_" + base64.StdEncoding.EncodeToString([]byte("callback-s3cret-0123456789abcdef")),
		"TEST_ITSM_TOKEN":        "itsm-s3cret-94ab",
		"DATABASE_URL":           "postgres://app:dsn-s3cret-55d0@db.internal/manent",
	}
	hash := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	cfgPath := filepath.Join(dir, "manent-server.yaml")
	cfg := fmt.Sprintf(`artifacts: {sources: ["file:///**"]}
auth:
  tokens:
    - {name: ci, sha256: %q}
    - {name: reader, sha256: %q}
rbac:
  - {subjects: ["token:ci"], permissions: [deployment.submit, deployment.dry-run, deployment.read], applications: [billing]}
  - {subjects: ["token:reader"], permissions: [deployment.read]}
callbacks: {allow: ["http://127.0.0.1:*/**"], secret_env: TEST_CALLBACK_SECRET}
itsm: {url: "http://127.0.0.1:9/changes", token_env: TEST_ITSM_TOKEN}
plugins: {steps: [script], pass_env: [TEST_PASSED]}
`, hash("ci-token"), hash("reader-token"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"MANENT_EXECUTOR_ID=sandbox-worker", "TEST_PASSED=passed-value"}
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	p := startArgs(t, []string{"--config", cfgPath}, data, db, env...)
	ci := api.NewClient(p.addr, "ci-token", nil)
	reader := api.NewClient(p.addr, "reader-token", nil)
	ctx := context.Background()

	art := filepath.Join(dir, "app.txt")
	if err := os.WriteFile(art, []byte("release"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(data, "targets")
	descriptor := func(targetDir, steps string) []byte {
		return []byte(fmt.Sprintf(`apiVersion: manent/v1
application: billing
environment: prod
version: "1"
artifact: {url: "file://%s"}
target: {plugin: local, with: {dir: %q}}
%s`, art, targetDir, steps))
	}

	// 1. The environment dump.
	res, err := ci.Submit(ctx, descriptor(filepath.Join(root, "billing", "prod"),
		"steps:\n  - {name: dump, after: deploy, plugin: script, with: {command: [sh, -c, 'env; [ \"$TEST_PASSED\" = passed-value ] && echo pass_env reached the step'], env: {FROM_WITH: with-value}}}\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	d, err := ci.Wait(wctx, res.ID, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != manent.StateSuccess {
		t.Fatalf("deploy %s: %s", d.State, d.Error)
	}
	logs, err := reader.Logs(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	var logText strings.Builder
	for _, l := range logs.Lines {
		fmt.Fprintln(&logText, l.Text)
	}
	for _, want := range []string{"MANENT_DEPLOY_ID=" + res.ID, "MANENT_STEP=dump", "PATH=", "FROM_WITH=with-value",
		// A pass_env value reaches the step, and is masked in its log.
		"TEST_PASSED=***", "pass_env reached the step"} {
		if !strings.Contains(logText.String(), want) {
			t.Fatalf("the step's environment dump has no %q: the dump did not run?\n%s", want, logText.String())
		}
	}
	events := readEvents(t, reader, res.ID)
	steps, err := reader.Steps(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	places := map[string]string{
		"deploy log": logText.String(),
		"events":     events,
		"steps":      fmt.Sprintf("%+v", steps),
		"database":   readAll(t, dbFile, dbFile+"-wal"),
		"server log": readAll(t, filepath.Join(data, "server.log")),
	}
	for name, v := range secrets {
		needle := v
		if name == "TEST_CALLBACK_SECRET" {
			needle = strings.TrimPrefix(v, "whsec_")
		}
		for place, text := range places {
			if strings.Contains(text, needle) {
				t.Errorf("%s (%s) found in the %s", name, needle, place)
			}
		}
	}

	// 2. A custom step with a plugin plugins.steps does not list.
	_, err = ci.Submit(ctx, descriptor(filepath.Join(root, "billing", "prod"),
		"steps:\n  - {name: wait-cluster, after: deploy, plugin: cluster-ready, with: {cluster: eu-1}}\n"), false)
	if fe := refusedAt(t, err, "/steps/0/plugin"); !strings.Contains(fe, "wait-cluster") || !strings.Contains(fe, "plugins.steps") {
		t.Errorf("a step with plugin cluster-ready: %q, want a refusal naming the step and plugins.steps", fe)
	}

	// 3. The local target outside plugins.local.root (default <data>/targets).
	outside := filepath.Join(dir, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{outside, root + "/billing/../../../outside", filepath.Join(root, "link", "prod")} {
		for _, dryRun := range []bool{true, false} {
			_, err := ci.Submit(ctx, descriptor(target, ""), dryRun)
			if fe := refusedAt(t, err, "/target/with/dir"); !strings.Contains(fe, "plugins.local.root") && !strings.Contains(fe, `".."`) {
				t.Errorf("target dir %s (dry run %v): %q, want a refusal", target, dryRun, fe)
			}
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("the local target wrote outside its root: %v", entries)
	}
}

// refusedAt returns the message of err's field error at path (a 422), or
// fails the test.
func refusedAt(t *testing.T, err error, path string) string {
	t.Helper()
	var me *manent.Error
	if !errors.As(err, &me) || me.Code != manent.EInvalid {
		t.Fatalf("got %v, want a 422", err)
	}
	for _, f := range me.Fields {
		if f.Path == path {
			return f.Message
		}
	}
	t.Fatalf("422 %+v has no error at %s", me.Fields, path)
	return ""
}

// readEvents reads a final deploy's whole event stream.
func readEvents(t *testing.T, c *api.Client, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.EventsURL(id, false), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "event: done") {
		t.Fatalf("events: %d\n%s", resp.StatusCode, b)
	}
	return string(b)
}

// readAll concatenates the files that exist among paths.
func readAll(t *testing.T, paths ...string) string {
	t.Helper()
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}
