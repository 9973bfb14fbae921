package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// Identities of the authorisation matrix.
var (
	matrixTokens = []auth.TokenConfig{
		{Name: "right", SHA256: auth.HashToken("right-token")},
		{Name: "noperm", SHA256: auth.HashToken("noperm-token")},
		{Name: "otherenv", SHA256: auth.HashToken("otherenv-token")},
	}
	allPerms     = []string{"deployment.submit", "deployment.dry-run", "deployment.read", "deployment.cancel", "deployment.approve", "schedule.manage"}
	matrixPolicy = []auth.RBACRule{
		{Subjects: []string{"token:right"}, Permissions: allPerms, Applications: []string{"billing"}, Environments: []string{"staging"}},
		{Subjects: []string{"token:right"}, Permissions: []string{"audit.read"}},
		{Subjects: []string{"token:right"}, Permissions: []string{"agent.report"}, Clusters: []string{"eu-1"}},
		{Subjects: []string{"token:otherenv"}, Permissions: allPerms, Applications: []string{"billing"}, Environments: []string{"prod"}},
		{Subjects: []string{"token:otherenv"}, Permissions: []string{"agent.report"}, Clusters: []string{"us-1"}},
	}
)

// TestAuthorizationMatrix walks every authenticated route with no token, a
// bad token, a token without permission, a token with permission on another
// environment (or cluster) only, and the right token.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), matrixTokens, matrixPolicy)
	art := artifactFile(t)
	gate := filepath.Join(t.TempDir(), "gate")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	admin := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	res, err := admin.Submit(ctx, []byte(gatedDescriptor(art, "staging", gate)), false)
	if err != nil {
		t.Fatal(err)
	}
	id := res.ID
	desc := gatedDescriptor(art, "staging", gate)
	report := fmt.Sprintf(`{"cluster":"eu-1","time":%q,"pods":[],"workloads":[]}`, time.Now().UTC().Format(time.RFC3339))

	type route struct {
		method, path, body string
		ok                 []int // statuses the right token may get
	}
	routes := []route{
		{"POST", "/api/v1/deployments", desc, []int{202}},
		{"POST", "/api/v1/deployments?dry_run=true", desc, []int{200}},
		{"GET", "/api/v1/deployments?application=billing&environment=staging", "", []int{200}},
		{"GET", "/api/v1/deployments/" + id, "", []int{200}},
		{"GET", "/api/v1/deployments/" + id + "/steps", "", []int{200}},
		{"GET", "/api/v1/deployments/" + id + "/effective", "", []int{200}},
		{"GET", "/api/v1/deployments/" + id + "/logs", "", []int{200}},
		{"GET", "/api/v1/deployments/" + id + "/events", "", []int{200}},
		{"GET", "/api/v1/deployments/" + id + "/logs?follow=true", "", []int{200}},
		{"GET", "/api/v1/inventory?application=billing&environment=staging", "", []int{200}},
		{"GET", "/api/v1/activity?application=billing&environment=staging", "", []int{200}},
		{"GET", "/api/v1/events?application=billing&environment=staging", "", []int{200}},
		{"GET", "/api/v1/audit", "", []int{200}},
		{"POST", "/api/v1/agent/reports", report, []int{200, 202, 204}},
		{"GET", "/api/v1/clusters/eu-1/status", "", []int{200}},
		{"GET", "/api/v1/environments/billing/staging/history", "", []int{200}},
		{"GET", "/api/v1/environments/billing/staging/current", "", []int{200, 404}},
		{"GET", "/api/v1/metrics/dora?application=billing&environment=staging", "", []int{200}},
		{"POST", "/api/v1/environments/billing/staging/rollback", "", []int{409}},
		{"POST", "/api/v1/deployments/" + id + "/cancel", "", []int{202}},
	}
	// A caller without the permission is refused (403); a cluster's
	// status shows a reader what it may read of it, and nothing is a 404,
	// whether the cluster reported or not.
	denied := func(r route) []int {
		if strings.HasPrefix(r.path, "/api/v1/clusters/") {
			return []int{404}
		}
		return []int{403}
	}
	cases := []struct {
		name, token string
		want        func(r route) []int
	}{
		{"no token", "", func(route) []int { return []int{401} }},
		{"bad token", "not-a-token", func(route) []int { return []int{401} }},
		{"no permission", "noperm-token", denied},
		{"other environment", "otherenv-token", denied},
		{"right token", "right-token", func(r route) []int { return r.ok }},
	}
	for _, r := range routes {
		for _, c := range cases {
			t.Run(c.name+" "+r.method+" "+r.path, func(t *testing.T) {
				if strings.HasSuffix(r.path, "/events") || strings.Contains(r.path, "follow=true") || strings.HasPrefix(r.path, "/api/v1/events") {
					if c.name == "right token" {
						// A stream stays open while the deploy runs: check the
						// status line only.
						req, _ := http.NewRequest(r.method, srv.URL+r.path, nil)
						req.Header.Set("Authorization", "Bearer "+c.token)
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						defer cancel()
						resp, err := http.DefaultClient.Do(req.WithContext(ctx))
						if err != nil {
							t.Fatal(err)
						}
						resp.Body.Close()
						if resp.StatusCode != 200 {
							t.Fatalf("status %d, want 200", resp.StatusCode)
						}
						return
					}
				}
				status, body, hdr := do(t, r.method, srv.URL+r.path, c.token, r.body)
				want := c.want(r)
				for _, w := range want {
					if status == w {
						if status >= 400 {
							if ct := hdr.Get("Content-Type"); ct != api.ProblemContentType {
								t.Errorf("error Content-Type %q, want %s", ct, api.ProblemContentType)
							}
							var p api.Problem
							if err := json.Unmarshal(body, &p); err != nil || p.Status != status || p.Detail == "" {
								t.Errorf("problem %s: %+v %v", body, p, err)
							}
							// A deploy the caller may not read is not placed
							// for it: no application/environment in the 403.
							if status == http.StatusForbidden && strings.Contains(r.path, id) && strings.Contains(string(body), "staging") {
								t.Errorf("a 403 about deploy %s names its environment: %s", id, body)
							}
						}
						return
					}
				}
				t.Fatalf("status %d, want one of %v: %s", status, want, body)
			})
		}
	}
}

// TestPublicRoutes: health, readiness and metrics need no token (probes and
// Prometheus), and reveal nothing about deploys beyond counts.
func TestPublicRoutes(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if status, body, _ := do(t, "GET", srv.URL+p, "", ""); status != 200 {
			t.Errorf("%s: %d %s", p, status, body)
		}
	}
	if status, _, _ := do(t, "GET", srv.URL+"/api/v1/nope", "admin-token", ""); status != 404 {
		t.Errorf("unknown route: %d, want 404", status)
	}
	// A known path asked with a method it does not serve: 405 with Allow.
	for _, tt := range []struct{ method, path, allow string }{
		{"PUT", "/api/v1/deployments", "GET, HEAD, POST"},
		{"DELETE", "/api/v1/deployments/dpl_x", "GET, HEAD"},
		{"GET", "/api/v1/schedules/sch_x", "DELETE"},
	} {
		status, body, hdr := do(t, tt.method, srv.URL+tt.path, "admin-token", "")
		if status != 405 || hdr.Get("Allow") != tt.allow || hdr.Get("Content-Type") != api.ProblemContentType || !strings.Contains(problem(t, body).Detail, tt.allow) {
			t.Errorf("%s %s: %d Allow %q %s, want 405 with Allow %q", tt.method, tt.path, status, hdr.Get("Allow"), body, tt.allow)
		}
	}
	if status, _, _ := do(t, "PUT", srv.URL+"/api/v1/nope", "admin-token", ""); status != 404 {
		t.Errorf("unknown route with PUT: %d, want 404", status)
	}
	// A form upload of deploy.yml (curl -F) is 415 with how to send it.
	req, _ := http.NewRequest("POST", srv.URL+"/api/v1/deployments", strings.NewReader("--x\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\napiVersion: manent/v1\r\n--x--\r\n"))
	req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	req.Header.Set("Authorization", "Bearer admin-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 415 || !strings.Contains(problem(t, body).Detail, "--data-binary") {
		t.Errorf("multipart submit: %d %s, want 415 saying how to send the descriptor", resp.StatusCode, body)
	}
}

func TestBodyLimitAndRateLimit(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), matrixTokens, matrixPolicy, func(c *node.Config) { c.Limits.SubmissionsPerMinute = 2 })
	big := "apiVersion: manent/v1\n# " + strings.Repeat("x", 2<<20) + "\n"
	status, body, _ := do(t, "POST", srv.URL+"/api/v1/deployments", "right-token", big)
	if status != 413 {
		t.Fatalf("2 MiB body: %d %s, want 413", status, body)
	}
	art := artifactFile(t)
	desc := fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: staging\nversion: \"1\"\nartifact: {url: %q}\n", art)
	for i := 0; i < 2; i++ {
		if status, body, _ := do(t, "POST", srv.URL+"/api/v1/deployments", "right-token", desc); status != 202 {
			t.Fatalf("submission %d: %d %s", i, status, body)
		}
	}
	status, body, hdr := do(t, "POST", srv.URL+"/api/v1/deployments", "right-token", desc)
	if status != 429 || hdr.Get("Retry-After") == "" {
		t.Fatalf("third submission in a minute: %d Retry-After %q %s, want 429 with Retry-After", status, hdr.Get("Retry-After"), body)
	}
	// Another identity is not limited by the first one's submissions.
	if status, body, _ := do(t, "POST", srv.URL+"/api/v1/deployments", "admin-token", desc); status != 202 {
		t.Fatalf("admin submission: %d %s", status, body)
	}
}

func TestPolicyErrorsInOne422(t *testing.T) {
	t.Setenv("TEST_CALLBACK_SECRET", "whsec_"+base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")))
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil, func(c *node.Config) {
		c.Callbacks.Allow = []string{"https://ci.example/**"}
		c.Callbacks.SecretEnv = "TEST_CALLBACK_SECRET"
	})
	desc := `apiVersion: manent/v1
application: billing
environment: staging
version: "1"
artifact: {url: "ftp2://nowhere/app.tgz"}
callbacks:
  - url: http://127.0.0.1:9000/hook
  - url: "http://[::1]:9000/hook"
  - url: http://169.254.169.254/latest/meta-data
  - url: http://10.0.0.1/hook
`
	status, body, _ := do(t, "POST", srv.URL+"/api/v1/deployments", "admin-token", desc)
	var p api.Problem
	_ = json.Unmarshal(body, &p)
	if status != 422 {
		t.Fatalf("status %d %s, want 422", status, body)
	}
	paths := map[string]bool{}
	for _, e := range p.Errors {
		paths[e.Path] = true
	}
	// The schema refuses the ftp2 URL before the policies run.
	if !paths["/artifact/url"] {
		t.Fatalf("errors %v: want /artifact/url", p.Errors)
	}
	desc = strings.Replace(desc, "ftp2://nowhere/app.tgz", artifactFile(t), 1)
	status, body, _ = do(t, "POST", srv.URL+"/api/v1/deployments", "admin-token", desc)
	p = api.Problem{}
	_ = json.Unmarshal(body, &p)
	if status != 422 || len(p.Errors) != 4 {
		t.Fatalf("status %d errors %v: want 422 naming the 4 refused callbacks at once", status, p.Errors)
	}
	for i := 0; i < 4; i++ {
		if !bytes.Contains(body, []byte(fmt.Sprintf("/callbacks/%d/url", i))) {
			t.Errorf("no error for /callbacks/%d/url in %s", i, body)
		}
	}
}

func TestAuditChain(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newTestServer(t, db, nil, nil)
		c := api.NewClient(srv.URL, "admin-token", nil)
		ctx := context.Background()
		desc := fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: staging\nversion: \"1\"\nartifact: {url: %q}\n", artifactFile(t))
		res, err := c.Submit(ctx, []byte(desc), false)
		if err != nil {
			t.Fatal(err)
		}
		waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if d, err := c.Wait(waitCtx, res.ID, 50*time.Millisecond); err != nil || d.State != manent.StateSuccess {
			t.Fatalf("deploy: %v %+v", err, d)
		}
		if _, err := c.Cancel(ctx, res.ID); manent.ErrorCode(err) != manent.EConflict {
			t.Fatalf("cancel of a finished deploy: %v", err)
		}
		status, body, _ := do(t, "GET", srv.URL+"/api/v1/audit", "admin-token", "")
		if status != 200 {
			t.Fatalf("audit: %d %s", status, body)
		}
		var page struct {
			Items []struct {
				Action, Identity, Outcome, Target string
				RequestID                         string `json:"request_id"`
			}
		}
		_ = json.Unmarshal(body, &page)
		var actions []string
		for _, e := range page.Items {
			actions = append(actions, e.Action+":"+e.Outcome)
			if e.RequestID == "" {
				t.Errorf("entry %+v has no request id", e)
			}
		}
		want := "deployment.cancel:refused,deployment.finish:SUCCESS,deployment.submit:accepted"
		if strings.Join(actions, ",") != want {
			t.Fatalf("audit actions %v, want %s (newest first)", actions, want)
		}
		n, problems, err := srv.Store.VerifyAudit(ctx)
		if err != nil || n != 3 || len(problems) != 0 {
			t.Fatalf("verify: %d rows, %v, %v", n, problems, err)
		}
		// An edited row is caught.
		if _, err := srv.Store.DB().ExecContext(ctx, `UPDATE manent_audit SET identity = 'token:someone-else' WHERE seq = 1`); err != nil {
			t.Fatal(err)
		}
		_, problems, _ = srv.Store.VerifyAudit(ctx)
		if len(problems) != 1 || problems[0].Seq != 1 || !strings.Contains(problems[0].Problem, "edited") {
			t.Fatalf("after an edit: %v, want row 1 reported as edited", problems)
		}
		// A deleted row is caught too.
		if _, err := srv.Store.DB().ExecContext(ctx, `DELETE FROM manent_audit WHERE seq = 2`); err != nil {
			t.Fatal(err)
		}
		_, problems, _ = srv.Store.VerifyAudit(ctx)
		if len(problems) < 2 {
			t.Fatalf("after a deletion: %v, want the gap reported", problems)
		}
	})
}
