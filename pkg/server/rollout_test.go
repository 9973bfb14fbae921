package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/node"
)

// A percentage rollout on a target that cannot deploy a share of a release
// answers 422 problem+json naming /rollout/percentages (SPEC §11.6), for a
// submission and a dry run alike; the same rollout on the http target told
// the share ({percent} in its URL) is accepted.
func TestPercentRolloutRefusedForIncapableTarget(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil, func(c *node.Config) {
		c.Plugins.HTTPAllow = []string{"https://platform.example/**"}
	})
	art := artifactFile(t)
	base := fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: \"1\"\nartifact: {url: %q}\nrollout: {percentages: [10, 100]}\n", art)
	post := func(body, query string) (int, string, api.Problem) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/deployments"+query, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer admin-token")
		req.Header.Set("Content-Type", "application/yaml")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var p api.Problem
		_ = json.Unmarshal(b, &p)
		return resp.StatusCode, resp.Header.Get("Content-Type"), p
	}
	for _, q := range []string{"", "?dry_run=true"} {
		for _, target := range []string{"", "target: {plugin: local, with: {dir: " + filepath.Join(srv.DataDir, "targets", "never") + "}}\n",
			"target: {plugin: http, with: {deploy_url: \"https://platform.example/deploy\"}}\n"} {
			status, ctype, p := post(base+target, q)
			if status != http.StatusUnprocessableEntity || ctype != api.ProblemContentType || len(p.Errors) != 1 ||
				p.Errors[0].Path != "/rollout/percentages" || !strings.Contains(p.Errors[0].Message, "cannot honour a percentage rollout") {
				t.Errorf("%q%s: %d %s %+v, want 422 problem+json at /rollout/percentages", target, q, status, ctype, p)
			}
		}
	}
	status, _, p := post(base+"target: {plugin: http, with: {deploy_url: \"https://platform.example/deploy?share={percent}\"}}\n", "?dry_run=true")
	if status != http.StatusOK {
		t.Errorf("http target told the share: %d %+v, want it valid", status, p)
	}
}
