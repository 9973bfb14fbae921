package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/store"
)

// A submission whose target plugin's validate gives no verdict (it
// crashes without a response) is answered 503 problem+json with a
// Retry-After, naming the plugin, and stores nothing: a 422 told a CI job
// the descriptor was wrong, and it did not retry. The dry run answers the
// same.
func TestUndecidedValidateIs503(t *testing.T) {
	t.Parallel()
	pluginDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(pluginDir, "manent-plugin-crashy"), []byte("#!/bin/sh\ncat >/dev/null\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil, func(c *node.Config) { c.Plugins.Path = []string{pluginDir} })
	desc := fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: staging\nversion: \"1\"\nartifact: {url: %q}\ntarget: {plugin: crashy}\n", artifactFile(t))
	for _, path := range []string{"/api/v1/deployments", "/api/v1/deployments?dry_run=true"} {
		status, body, hdr := do(t, "POST", srv.URL+path, "admin-token", desc)
		var p api.Problem
		_ = json.Unmarshal(body, &p)
		secs, err := strconv.Atoi(hdr.Get("Retry-After"))
		if status != 503 || err != nil || secs < 1 || hdr.Get("Content-Type") != api.ProblemContentType ||
			!strings.Contains(p.Detail, "plugin crashy: validate exited with status 3") || !strings.Contains(p.Detail, "manent-plugin-crashy") {
			t.Errorf("POST %s: %d Retry-After %q Content-Type %q %s, want a 503 problem+json with Retry-After naming the plugin",
				path, status, hdr.Get("Retry-After"), hdr.Get("Content-Type"), body)
		}
	}
	if recs, _, err := srv.Store.List(context.Background(), store.Filter{}); err != nil || len(recs) != 0 {
		t.Errorf("deploys stored: %d (%v), want none", len(recs), err)
	}
}
