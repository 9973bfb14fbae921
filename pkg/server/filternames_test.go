package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/enginetest"
)

// A filter no descriptor's name can match (uppercase, a space) is a 422
// naming the rule on every route that reads across deploys, as on DORA
// and the environment routes: ?application=Billing answered an empty list,
// as if nothing had ever been deployed there.
func TestFilterThatIsNoNameIsRefused(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	for _, path := range []string{
		"/api/v1/deployments?application=Billing",
		"/api/v1/deployments?environment=Prod%20EU",
		"/api/v1/activity?application=Billing",
		"/api/v1/schedules?environment=Prod",
		"/api/v1/metrics/dora?application=Billing",
		"/api/v1/events?application=Billing",
	} {
		code, body, h := do(t, http.MethodGet, srv.URL+path, "admin-token", "")
		if code != http.StatusUnprocessableEntity || h.Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(string(body), "is not a valid") || !strings.Contains(string(body), "lowercase") {
			t.Errorf("GET %s: %d %s %s; want a 422 naming the rule", path, code, h.Get("Content-Type"), body)
		}
	}
	// Valid names are filters as before.
	if code, body, _ := do(t, http.MethodGet, srv.URL+"/api/v1/deployments?application=billing&environment=prod", "admin-token", ""); code != http.StatusOK {
		t.Errorf("a valid filter: %d %s", code, body)
	}
}
