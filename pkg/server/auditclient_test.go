package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/node"
)

// An audit entry names the client of the request that made it: the
// address the per-address limits count — X-Forwarded-For read only from a
// proxy in trusted_proxies — and its User-Agent, bounded. GET
// /api/v1/audit answers them (client_addr, user_agent) and the chain
// verifies. The audit log had no word of where a request came from.
func TestAuditNamesTheClient(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil, func(c *node.Config) {
		c.TrustedProxies = []string{"127.0.0.1/32"}
	})
	art := artifactFile(t)
	submit := func(c *http.Client, version, ua string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/v1/deployments", bytes.NewReader(simple(art, "dev", version, "")))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer admin-token")
		req.Header.Set("Content-Type", "application/yaml")
		req.Header.Set("X-Forwarded-For", "198.51.100.4, 203.0.113.9")
		req.Header.Set("User-Agent", ua)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("submit %s: %d, want 202", version, resp.StatusCode)
		}
	}
	submit(clientFrom("127.0.0.1"), "1.0", "manent-ci/2.1 "+strings.Repeat("x", 2000))
	submit(clientFrom("127.0.0.2"), "1.1", "curl/8.5.0") // not a trusted proxy: its X-Forwarded-For is its own

	status, body, _ := do(t, http.MethodGet, srv.URL+"/api/v1/audit?action=deployment.submit", "admin-token", "")
	var res api.AuditResult
	if err := json.Unmarshal(body, &res); status != http.StatusOK || err != nil || len(res.Items) != 2 {
		t.Fatalf("GET /api/v1/audit: %d %s (%v), want the two submissions", status, body, err)
	}
	second, first := res.Items[0], res.Items[1]
	if first.ClientAddr != "203.0.113.9" || !strings.HasPrefix(first.UserAgent, "manent-ci/2.1 xx") || len(first.UserAgent) > 256 {
		t.Errorf("through the trusted proxy: client %q, user agent %q (%d bytes); want 203.0.113.9 and the user agent clipped to 256 bytes",
			first.ClientAddr, first.UserAgent, len(first.UserAgent))
	}
	if second.ClientAddr != "127.0.0.2" || second.UserAgent != "curl/8.5.0" {
		t.Errorf("from an untrusted peer: client %q, user agent %q; want 127.0.0.2 and curl/8.5.0", second.ClientAddr, second.UserAgent)
	}
	if n, problems, err := srv.Store.VerifyAudit(context.Background()); err != nil || len(problems) != 0 || n < 2 {
		t.Errorf("verify: %d rows, %v, %v", n, problems, err)
	}
}
