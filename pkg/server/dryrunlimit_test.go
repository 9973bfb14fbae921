package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/envconfig"
	"github.com/manent-io/manent/pkg/node"
)

// A dry run runs every admission check — the environment provider, DNS for
// callbacks, the policy — so it takes from the identity's
// limits.submissions_per_minute as a submission does: a token that may
// only dry-run could otherwise send the environment provider a request
// for each of its own, as fast as it could loop. Past the budget a dry run
// is a 429 with Retry-After, before anything is asked; another identity is
// not affected.
func TestDryRunIsRateLimited(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	targets := filepath.Join(t.TempDir(), "targets")
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"target": {"plugin": "local", "with": {"dir": %q}}}`, targets)
	}))
	defer provider.Close()
	tokens := []auth.TokenConfig{{Name: "dry", SHA256: auth.HashToken("dry-token")}}
	rules := []auth.RBACRule{{Subjects: []string{"token:dry"}, Permissions: []string{"deployment.dry-run"}}}
	srv := newTestServer(t, enginetest.SQLite(t), tokens, rules, func(c *node.Config) {
		configured(c)
		c.Environments = envconfig.Settings{Provider: "http", URL: provider.URL + "/environments/{environment}", Timeout: 2 * time.Second}
		c.Plugins.Local.Root = targets
		c.Limits.SubmissionsPerMinute = 2
	})
	desc := fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: staging\nversion: \"1\"\nartifact: {url: %q}\n", artifactFile(t))
	url := srv.URL + "/api/v1/deployments?dry_run=true"
	for i := range 2 {
		if status, body, _ := do(t, "POST", url, "dry-token", desc); status != 200 {
			t.Fatalf("dry run %d: %d %s", i, status, body)
		}
	}
	asked := calls.Load()
	status, body, hdr := do(t, "POST", url, "dry-token", desc)
	if status != 429 || hdr.Get("Retry-After") == "" {
		t.Fatalf("third dry run in a minute: %d Retry-After %q %s, want 429 with Retry-After", status, hdr.Get("Retry-After"), body)
	}
	if got := calls.Load(); got != asked {
		t.Errorf("the refused dry run asked the environment provider (%d requests, was %d)", got, asked)
	}
	// A descriptor with problems of its own gets the server's checks too
	// (one answer lists every problem): past the budget it gets its own
	// problems only, with one saying why, and the provider is not asked.
	status, body, _ = do(t, "POST", url, "dry-token", desc+"rollback: {on: [deploy, smok]}\n")
	if status != 422 || !strings.Contains(string(body), "limits.submissions_per_minute") || !strings.Contains(string(body), "smok") {
		t.Fatalf("an invalid descriptor past the budget: %d %s, want a 422 with its own problems saying the server's checks were not run", status, body)
	}
	if got := calls.Load(); got != asked {
		t.Errorf("an invalid descriptor past the budget asked the environment provider (%d requests, was %d)", got, asked)
	}
	if status, body, _ := do(t, "POST", url, "admin-token", desc); status != 200 {
		t.Fatalf("another identity's dry run: %d %s", status, body)
	}
}
