package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/envconfig"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// Credentials the environment configuration gives a deploy — a target's
// `env` (a password, an Authorization value), a password parameter — reach the step, but no reader of
// the deploy sees them: not in the config step's output, the steps, the
// event stream, a dry run or GET …/current.
func TestEnvironmentCredentialsAreNotShownToReaders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const pw, tok = "s3cr3t-pw-9f1", "tok-77c2e"
	want := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(want, []byte(pw), 0o600); err != nil {
		t.Fatal(err)
	}
	env := fmt.Sprintf(`target:
  plugin: script
  with:
    command: [sh, -c, 'test "$DB_PASSWORD" = "$(cat %s)"']
    env: {DB_PASSWORD: %s, REGION: eu, UPSTREAM_AUTHORIZATION: "Bearer %s"}
parameters: {replicas: 2, api_token: %s}
`, want, pw, tok, tok)
	if err := os.WriteFile(filepath.Join(dir, "staging.yaml"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := newTestServer(t, enginetest.SQLite(t), []auth.TokenConfig{{Name: "reader", SHA256: auth.HashToken("reader-token")}},
		[]auth.RBACRule{{Subjects: []string{"token:reader"}, Permissions: []string{"deployment.read"}}},
		func(c *node.Config) {
			configured(c)
			c.Environments = envconfig.Settings{Provider: "files", Dir: dir}
		})
	admin := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	desc := []byte(fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: staging\nversion: \"7\"\nartifact: {url: %q}\n", artifactFile(t)))

	dry, err := admin.Submit(ctx, desc, true)
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]string{}
	b, _ := json.Marshal(dry)
	shown["dry run"] = string(b)

	res, err := admin.Submit(ctx, desc, false)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	d, err := admin.Wait(wctx, res.ID, 50*time.Millisecond)
	if err != nil || d.State != manent.StateSuccess {
		// The step checks it got the password: the deploy runs with the original.
		t.Fatalf("deploy: %v %+v", err, d)
	}
	out := configStep(t, d)
	with, _ := out["target"].(map[string]any)["with"].(map[string]any)
	if envs, _ := with["env"].(map[string]any); envs["REGION"] != "eu" {
		t.Errorf("config output %v: the settings that are no credentials should stay visible", out)
	}

	readerViews(t, srv.URL, "reader-token", res.ID, "billing/staging", shown)
	if !strings.Contains(shown["events"], `"name":"config"`) {
		t.Fatalf("the event stream has no config step: %s", shown["events"])
	}
	for where, body := range shown {
		for _, secret := range []string{pw, tok} {
			if strings.Contains(body, secret) {
				t.Errorf("%s shows the credential %q: %s", where, secret, body)
			}
		}
	}
	if !strings.Contains(shown["current"], `"DB_PASSWORD":"[redacted]"`) || !strings.Contains(shown["effective"], `"DB_PASSWORD":"[redacted]"`) || !strings.Contains(shown["steps"], `"UPSTREAM_AUTHORIZATION":"[redacted]"`) {
		t.Errorf("the redacted settings should keep their names:\ncurrent %s\nsteps %s", shown["current"], shown["steps"])
	}
}

// readerViews adds to shown what token reads of deploy id and of its
// environment env ("app/env"): its status, steps, event stream, the
// environment's current release and the deploy's effective descriptor.
func readerViews(t *testing.T, base, token, id, env string, shown map[string]string) {
	t.Helper()
	for name, path := range map[string]string{
		"status":    "/api/v1/deployments/" + id,
		"steps":     "/api/v1/deployments/" + id + "/steps",
		"events":    "/api/v1/deployments/" + id + "/events",
		"current":   "/api/v1/environments/" + env + "/current",
		"effective": "/api/v1/deployments/" + id + "/effective",
	} {
		shown[name] = shownTo(t, base, token, path)
	}
}

// shownTo reads path as token and returns what a reader sees there: a JSON
// answer compacted, or an event stream up to its final event.
func shownTo(t *testing.T, base, token, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, _ := io.ReadAll(resp.Body)
		var compact bytes.Buffer
		if err := json.Compact(&compact, body); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return compact.String()
	}
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		sb.WriteString(sc.Text() + "\n")
		if sc.Text() == "event: done" {
			break
		}
	}
	return sb.String()
}

// A callback URL's query often is its credential (an Azure Function's
// `?code=`, a bridge's `?key=`) under a name that says nothing: no reader
// of the deploy sees its values — not the dry run, status, steps, events,
// GET …/current or …/effective — while the callback is sent to the URL
// itself. QA: `?code=…` was shown to every reader, though the delivery
// views hide the whole query.
func TestCallbackURLQueryIsNotShownToReaders(t *testing.T) {
	const code, key = "QQSECRET-code-4f1", "QQSECRET-key-9a2"
	secretEnv := "REDACTTEST_CALLBACK_SECRET"
	t.Setenv(secretEnv, "whsec_"+base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")))
	got := make(chan string, 16)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.URL.RawQuery:
		default:
		}
	}))
	defer cb.Close()
	srv := newTestServer(t, enginetest.SQLite(t), []auth.TokenConfig{{Name: "reader", SHA256: auth.HashToken("reader-token")}},
		[]auth.RBACRule{{Subjects: []string{"token:reader"}, Permissions: []string{"deployment.read"}}},
		func(c *node.Config) {
			configured(c)
			c.Callbacks.Allow = []string{cb.URL + "/**"}
			c.Callbacks.SecretEnv = secretEnv
		})
	admin := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	hook := cb.URL + "/hook?code=" + code + "&k=" + key + "&region=eu"
	desc := []byte(fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: staging\nversion: \"7\"\nartifact: {url: %q}\ntarget: {plugin: script, with: {command: [\"true\"]}}\ncallbacks: [{url: %q}]\n", artifactFile(t), hook))

	shown := map[string]string{}
	dry, err := admin.Submit(ctx, desc, true)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(dry)
	shown["dry run"] = string(b)
	res, err := admin.Submit(ctx, desc, false)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if d, err := admin.Wait(wctx, res.ID, 50*time.Millisecond); err != nil || d.State != manent.StateSuccess {
		t.Fatalf("deploy: %v %+v", err, d)
	}
	select {
	case q := <-got:
		if !strings.Contains(q, "code="+code) {
			t.Errorf("the callback was sent with query %q: the deploy runs with the URL itself", q)
		}
	case <-wctx.Done():
		t.Fatal("no callback came")
	}
	readerViews(t, srv.URL, "reader-token", res.ID, "billing/staging", shown)
	for where, body := range shown {
		for _, secret := range []string{code, key} {
			if strings.Contains(body, secret) {
				t.Errorf("%s shows the callback URL's query value %q: %s", where, secret, body)
			}
		}
	}
	if !strings.Contains(shown["effective"], "/hook?code=xxxxx") {
		t.Errorf("the effective deploy should keep the callback URL with its query's names: %s", shown["effective"])
	}
}
