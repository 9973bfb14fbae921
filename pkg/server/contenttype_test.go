package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
)

// The JSON routes read a body only when its Content-Type says JSON
// (application/json or a +json type, parameters allowed): a cross-site
// form (enctype=text/plain) or a no-cors fetch with Content-Type
// text/plain is a "simple request" a browser sends without a preflight,
// with a body that may parse as JSON. The API takes bearer tokens only, so
// none of those carries a credential today; the check keeps it so if a
// cookie ever reaches the API, and says what was sent and what is wanted.
// The descriptor route keeps reading any type (YAML or JSON, curl -d).
func TestJSONRoutesRefuseOtherContentTypes(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, enginetest.SQLite(t), nil, nil)
	rollback := ts.URL + "/api/v1/environments/billing/prod/rollback"
	approve := ts.URL + "/api/v1/deployments/dep_00000000000000000000000000/approve"
	report := ts.URL + "/api/v1/agent/reports"
	snap := `{"cluster": "c1", "time": "` + time.Now().UTC().Format(time.RFC3339) + `", "pods": [], "workloads": []}`
	for _, tt := range []struct {
		name, url, body, contentType string
		status                       int
		want                         string
	}{
		{"rollback text/plain", rollback, `{"to": "1.0"}`, "text/plain", 415,
			`Content-Type text/plain: this route reads a JSON body; send it with Content-Type: application/json`},
		{"rollback form", rollback, `{"to": "1.0"}`, "application/x-www-form-urlencoded", 415,
			`Content-Type application/x-www-form-urlencoded: this route reads a JSON body`},
		{"rollback none", rollback, `{"to": "1.0"}`, "", 415,
			`no Content-Type: this route reads a JSON body; send it with Content-Type: application/json`},
		{"rollback bad charset", rollback, `{"to": "1.0"}`, "application/json; charset=utf-16", 415,
			`Content-Type application/json; charset=utf-16: the body must be UTF-8`},
		{"rollback json", rollback, `{"to": "1.0"}`, "application/json", 409, ""},
		{"rollback json utf-8", rollback, `{"to": "1.0"}`, "Application/JSON; charset=UTF-8", 409, ""},
		{"rollback +json", rollback, `{"to": "1.0"}`, "application/vnd.manent+json", 409, ""},
		{"rollback no body, no type", rollback, "", "", 409, ""},
		{"approve text/plain", approve, `{"comment": "ok"}`, "text/plain;charset=UTF-8", 415,
			`Content-Type text/plain;charset=UTF-8: this route reads a JSON body`},
		{"approve multipart", approve, `{"comment": "ok"}`, "multipart/form-data; boundary=x", 415,
			`Content-Type multipart/form-data; boundary=x: this route reads a JSON body`},
		{"approve json", approve, `{"comment": "ok"}`, "application/json", 404, ""},
		{"report text/plain", report, snap, "text/plain", 415,
			`Content-Type text/plain: this route reads a JSON body`},
		{"report none", report, snap, "", 415, `no Content-Type`},
		{"report json", report, snap, "application/json", 200, ""},
	} {
		// sendBody sends a JSON-looking body as application/json unless told.
		code, ct, p := sendBody(t, http.MethodPost, tt.url, []byte(tt.body), "Content-Type", tt.contentType)
		if code != tt.status || (tt.want != "" && (ct != api.ProblemContentType || !strings.Contains(p.Detail, tt.want))) {
			t.Errorf("%s: %d %s %q, want %d with %q", tt.name, code, ct, p.Detail, tt.status, tt.want)
		}
	}
}
