package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
)

// A list route refuses a query parameter it does not read — a script's
// typo (?stat=FAILED) listed everything, as if unfiltered — with a 400
// naming it and the closest known one; and one given twice (?state=A&
// state=B read A only), saying to give it once. What the CLI, the web
// page and the agent send is still read.
func TestListRoutesRefuseUnknownAndRepeatedParameters(t *testing.T) {
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	cases := []struct {
		path, query, want string
	}{
		{"/api/v1/deployments", "stat=FAILED", `"stat"; did you mean "state"?`},
		{"/api/v1/deployments", "applicaton=billing", `"applicaton"; did you mean "application"?`},
		{"/api/v1/deployments", "state=FAILED&state=ERROR", `"state" is given 2 times`},
		{"/api/v1/deployments", "page=2", `"page"`},
		{"/api/v1/activity", "enviroment=prod", `did you mean "environment"?`},
		{"/api/v1/activity", "limit=5&limit=6", `"limit" is given 2 times`},
		{"/api/v1/audit", "actoin=deployment.submit", `did you mean "action"?`},
		{"/api/v1/environments/billing/prod/history", "cursr=x", `did you mean "cursor"?`},
		{"/api/v1/metrics/dora", "windw=7d", `did you mean "window"?`},
		{"/api/v1/inventory", "application=billing&application=shop", `"application" is given 2 times`},
		{"/api/v1/schedules", "env=prod", `"env"`},
		{"/api/v1/workers", "state=dead", `"state"`},
		{"/api/v1/clusters", "cluster=eu", `"cluster"`},
	}
	for _, c := range cases {
		status, body, h := do(t, "GET", srv.URL+c.path+"?"+c.query, "admin-token", "")
		var p api.Problem
		_ = json.Unmarshal(body, &p)
		if status != http.StatusBadRequest || !strings.Contains(h.Get("Content-Type"), "problem+json") || !strings.Contains(p.Detail, c.want) {
			t.Errorf("GET %s?%s: %d %s\nwant 400 problem+json saying %s", c.path, c.query, status, body, c.want)
		}
		if len(p.Errors) != 1 || !strings.HasPrefix(p.Errors[0].Path, "query.") {
			t.Errorf("GET %s?%s: errors %+v, want the parameter as query.<name>", c.path, c.query, p.Errors)
		}
	}

	// A hostile name is clipped, not echoed whole.
	long := strings.Repeat("x", 1<<16)
	status, body, _ := do(t, "GET", srv.URL+"/api/v1/deployments?"+long+"=1", "admin-token", "")
	if status != http.StatusBadRequest || len(body) > 2048 {
		t.Errorf("a 64 KiB parameter name: %d, %d bytes of answer; want 400, short", status, len(body))
	}

	// What the clients send is read.
	for _, ok := range []string{
		"/api/v1/deployments?" + url.Values{"application": {"billing"}, "environment": {"prod"}, "state": {"ERROR,CANCELLED"}, "limit": {"5"}}.Encode(),
		"/api/v1/activity?" + url.Values{"application": {"billing"}, "environment": {"prod"}, "from": {"0"}, "limit": {"50"}}.Encode(),
		"/api/v1/audit?" + url.Values{"action": {"deployment.submit"}, "before": {"9"}, "limit": {"100"}}.Encode(),
		"/api/v1/environments/billing/prod/history?limit=50",
		"/api/v1/metrics/dora?" + url.Values{"application": {"billing"}, "environment": {"prod"}, "window": {"7d"}}.Encode(),
		"/api/v1/inventory?application=billing&environment=prod",
		"/api/v1/schedules?application=billing",
		"/api/v1/workers",
		"/api/v1/clusters",
	} {
		if status, body, _ := do(t, "GET", srv.URL+ok, "admin-token", ""); status != http.StatusOK {
			t.Errorf("GET %s: %d %s, want 200", ok, status, body)
		}
	}
}
