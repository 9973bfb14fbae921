package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
)

// A path or query parameter that is not text — a NUL, a byte that is not
// UTF-8, a control character — or a query string that cannot be decoded is
// a 400 naming where it is, on every route, before any lookup: on
// PostgreSQL the lookup itself failed (a NUL or an invalid byte in a text
// parameter) and every such request was a 500; a malformed pair
// (?application=%zz) was dropped, and the list answered unfiltered.
func TestRequestTargetNotText(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		ts := newTestServer(t, db, nil, nil)
		for _, tt := range []struct {
			method, path string
			want         string // in the detail
		}{
			{"GET", "/api/v1/deployments/abc%00def", "the path holds the control character U+0000 at character 24"},
			{"GET", "/api/v1/deployments/abc%ffdef", "the path is not UTF-8 text: invalid byte 0xff at byte 24"},
			{"GET", "/api/v1/deployments/abc%1bdef/steps", "the path holds an escape character (U+001B"},
			{"GET", "/api/v1/deployments/abc%00def/logs", "U+0000"},
			{"GET", "/api/v1/deployments/abc%00def/events", "U+0000"},
			{"POST", "/api/v1/deployments/abc%00def/cancel", "U+0000"},
			{"POST", "/api/v1/deployments/abc%ffdef/approve", "0xff"},
			{"DELETE", "/api/v1/schedules/%00", "U+0000"},
			{"GET", "/api/v1/clusters/a%00b/status", "U+0000"},
			{"GET", "/api/v1/deployments?application=%00", "query parameter application holds the control character U+0000 at character 1"},
			{"GET", "/api/v1/deployments?application=billing&environment=%ff", "query parameter environment is not UTF-8 text: invalid byte 0xff at byte 1"},
			{"GET", "/api/v1/deployments?app%00=x", "a query parameter name holds the control character U+0000"},
			{"GET", "/api/v1/deployments?application=%zz", `the query string is malformed: invalid URL escape "%zz"`},
			{"GET", "/api/v1/audit?action=%ff", "query parameter action is not UTF-8"},
			{"GET", "/api/v1/activity?application=%e2%80%ae", "query parameter application holds the bidirectional-text control U+202E"},
			{"GET", "/api/v1/metrics/dora?application=%00", "U+0000"},
			{"GET", "/api/v1/events?application=%00", "U+0000"},
			{"POST", "/api/v1/environments/billing/prod/rollback?x=%00", "U+0000"},
		} {
			code, body, h := do(t, tt.method, ts.URL+tt.path, "admin-token", "")
			var p api.Problem
			_ = json.Unmarshal(body, &p)
			if code != http.StatusBadRequest || h.Get("Content-Type") != api.ProblemContentType || !strings.Contains(p.Detail, tt.want) {
				t.Errorf("%s %s: %d %s %s, want 400 problem+json with %q", tt.method, tt.path, code, h.Get("Content-Type"), body, tt.want)
			}
		}
		// Text is still text: a name with an accent is looked up (and not found).
		if code, body, _ := do(t, "GET", ts.URL+"/api/v1/deployments/caf%C3%A9", "admin-token", ""); code != http.StatusNotFound {
			t.Errorf("GET a UTF-8 id: %d %s, want 404", code, body)
		}
	})
}
