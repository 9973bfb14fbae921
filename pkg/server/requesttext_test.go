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
	t.Parallel()
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

// An id that is not found is quoted clipped: a 100 kB path is not answered
// with a 100 kB problem.
func TestLongIDClipped(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, enginetest.SQLite(t), nil, nil)
	long := strings.Repeat("a", 100_000)
	for _, tt := range []struct{ method, path string }{
		{"GET", "/api/v1/deployments/" + long},
		{"GET", "/api/v1/deployments/" + long + "/steps"},
		{"POST", "/api/v1/deployments/" + long + "/cancel"},
		{"DELETE", "/api/v1/schedules/" + long},
		{"GET", "/api/v1/clusters/" + long + "/status"},
	} {
		code, body, _ := do(t, tt.method, ts.URL+tt.path, "admin-token", "")
		if code != http.StatusNotFound || len(body) > 400 || !strings.Contains(string(body), "aaaa…") {
			t.Errorf("%s %s…: %d, %d bytes %.120s…, want a 404 quoting the id clipped", tt.method, tt.path[:40], code, len(body), body)
		}
	}
}
