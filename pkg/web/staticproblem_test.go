package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/api"
)

// A stylesheet or script the UI does not have is an error a script or a
// <link> reads, not a page: it answers problem+json naming the file, as
// every other error that is not a page. It answered text/plain "404 page
// not found".
func TestMissingStaticFileIsAProblem(t *testing.T) {
	s := startUI(t)
	for _, path := range []string{"/static/nope.js", "/static/", "/static/app.js/x"} {
		p := newBrowser(t, s.URL).get(path)
		if p.Status != http.StatusNotFound || p.Header.Get("Content-Type") != api.ProblemContentType {
			t.Errorf("GET %s: %d %q %q, want 404 %s", path, p.Status, p.Header.Get("Content-Type"), p.Body, api.ProblemContentType)
			continue
		}
		var pr api.Problem
		if err := json.Unmarshal([]byte(p.Body), &pr); err != nil || pr.Status != 404 || !strings.Contains(pr.Detail, "no static file") {
			t.Errorf("GET %s: %+v %v, want a 404 saying there is no static file", path, pr, err)
		}
	}
	if p := newBrowser(t, s.URL).get("/static/app.js"); p.Status != 200 {
		t.Errorf("GET /static/app.js: %d", p.Status)
	}
}
