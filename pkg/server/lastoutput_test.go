package server_test

import (
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
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// brokenPlugin is an external plugin that dies like a Python program: a
// traceback on stderr that names its $API_TOKEN, no response, exit 2.
const brokenPlugin = `#!/bin/sh
cat >/dev/null
if [ "$MANENT_ACTION" = validate ]; then echo '{"ok": true}'; exit 0; fi
echo 'Traceback (most recent call last):' >&2
echo '  File "deploy.py", line 3, in main' >&2
printf 'requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: https://api.example/v1?token=%s\n' "$API_TOKEN" >&2
exit 2
`

// A script step or an external plugin that fails says why in the step's
// error and the deploy's — what `status`, `deploy --wait`, the web page,
// the events and the callbacks show — with the last lines it printed,
// masked as its log is: the with.env credential it printed is "***"
// everywhere, and colour codes and control characters never reach an
// error line.
func TestFailedCommandSaysWhy(t *testing.T) {
	const (
		dbPassword = "db-pw-3e8c0b71"
		apiToken   = "tok-9d41f2aa"
		cbSecret   = "LASTOUTPUT_CALLBACK_SECRET"
	)
	t.Setenv(cbSecret, "whsec_"+base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")))
	var (
		mu        sync.Mutex
		callbacks []string
		finished  = make(chan struct{}, 2)
	)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		callbacks = append(callbacks, string(b))
		mu.Unlock()
		if strings.Contains(string(b), `"type":"finished"`) {
			finished <- struct{}{}
		}
	}))
	defer cb.Close()
	pluginDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(pluginDir, "manent-plugin-broken"), []byte(brokenPlugin), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := newTestServer(t, enginetest.SQLite(t), []auth.TokenConfig{{Name: "reader", SHA256: auth.HashToken("reader-token")}},
		[]auth.RBACRule{{Subjects: []string{"token:reader"}, Permissions: []string{"deployment.read"}}},
		func(c *node.Config) {
			configured(c)
			c.Plugins.Steps = []string{"script", "broken"}
			c.Plugins.Path = []string{pluginDir}
			c.Callbacks.Allow = []string{cb.URL + "/**"}
			c.Callbacks.SecretEnv = cbSecret
		})
	admin := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	art := artifactFile(t)

	migrate := `echo "applying 3 migrations"; ` +
		`printf '\033[31mpsql: error:\033[0m connection to server at "10.0.0.5" failed: FATAL:\tpassword authentication failed (password=%s)\n' "$DB_PASSWORD" >&2; ` +
		`echo; exit 1`
	cases := []struct {
		name, step, want string
	}{
		{"script", fmt.Sprintf(`
  - name: migrate
    after: deploy
    plugin: script
    max_retries: 0
    with:
      command: [sh, -c, %q]
      env: {DB_PASSWORD: %s}`, migrate, dbPassword),
			`step "migrate" failed: script sh exited with status 1; last output: applying 3 migrations | ` +
				`psql: error: connection to server at "10.0.0.5" failed: FATAL:\tpassword authentication failed (password=***)`},
		{"external", fmt.Sprintf(`
  - name: notify-cmdb
    after: deploy
    plugin: broken
    max_retries: 0
    with: {env: {API_TOKEN: %s}}`, apiToken),
			`step "notify-cmdb" failed: plugin broken: run exited with status 2 without a response; last output: ` +
				`Traceback (most recent call last): | File "deploy.py", line 3, in main | ` +
				`requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: https://api.example/v1?token=***`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			desc := fmt.Sprintf(`apiVersion: manent/v1
application: billing
environment: staging
version: "7"
artifact: {url: %q}
target: {plugin: script, with: {command: ["true"]}}
callbacks: [{url: %q, events: [finished]}]
steps:%s
`, art, cb.URL+"/hook", c.step)
			res, err := admin.Submit(ctx, []byte(desc), false)
			if err != nil {
				var me *manent.Error
				if errorsAs(err, &me) {
					t.Fatalf("%v: %+v", err, me.Fields)
				}
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			d, err := admin.Wait(wctx, res.ID, 50*time.Millisecond)
			if err != nil || d.State != manent.StateError {
				t.Fatalf("deploy: %v %+v: want ERROR", err, d)
			}
			select {
			case <-finished:
			case <-time.After(30 * time.Second):
				t.Fatal("no finished callback within 30 s")
			}
			get := func(path string) string { return shownTo(t, srv.URL, "reader-token", path) }
			mu.Lock()
			cbs := strings.Join(callbacks, "\n")
			mu.Unlock()
			shown := map[string]string{
				"status":    get("/api/v1/deployments/" + res.ID),
				"steps":     get("/api/v1/deployments/" + res.ID + "/steps"),
				"events":    get("/api/v1/deployments/" + res.ID + "/events"),
				"list":      get("/api/v1/deployments?application=billing"),
				"callbacks": cbs,
			}
			// As the JSON of every body shows it.
			inJSON := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
			for where, body := range shown {
				for _, secret := range []string{dbPassword, apiToken} {
					if strings.Contains(body, secret) {
						t.Errorf("%s shows the secret %q:\n%s", where, secret, body)
					}
				}
				if where != "steps" && !strings.Contains(body, inJSON(c.want)) {
					t.Errorf("%s does not say why the step failed, want %s in:\n%s", where, c.want, body)
				}
			}
			if step := inJSON(c.want[strings.Index(c.want, "failed: ")+len("failed: "):]); !strings.Contains(shown["steps"], step) {
				t.Errorf("the step's error should end with the last output, want %s in:\n%s", step, shown["steps"])
			}
		})
	}
}
