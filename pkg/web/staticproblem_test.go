package web_test

import (
	"encoding/json"
	"net/http"
	"regexp"
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

// Pages link the UI's script and stylesheet by an address that changes
// with their content (?v=<hash>), cached for long: a browser never runs
// an older release's app.js against a newer release's page. They were
// linked as /static/app.js, cached 5 minutes, so for 5 minutes after an
// upgrade the old script ran against the new HTML.
func TestAssetsAreLinkedByVersion(t *testing.T) {
	s := startUI(t)
	page := newBrowser(t, s.URL).get("/login")
	if page.Status != http.StatusOK {
		t.Fatalf("GET /login: %d", page.Status)
	}
	for _, name := range []string{"app.js", "app.css", "favicon.svg"} {
		m := regexp.MustCompile(`"(/static/` + regexp.QuoteMeta(name) + `\?v=([0-9a-f]{16}))"`).FindStringSubmatch(page.Body)
		if m == nil {
			t.Errorf("the page links %s by no /static/%s?v=<hash>:\n%s", name, name, page.Body)
			continue
		}
		p := newBrowser(t, s.URL).get(m[1])
		if p.Status != http.StatusOK || p.Header.Get("ETag") != `"`+m[2]+`"` || !strings.Contains(p.Header.Get("Cache-Control"), "immutable") {
			t.Errorf("GET %s: %d ETag %q Cache-Control %q, want 200, the version as ETag and a long cache", m[1], p.Status, p.Header.Get("ETag"), p.Header.Get("Cache-Control"))
		}
		// Another release's version (or none) is the current file, cached
		// briefly: it is not what that address named.
		for _, other := range []string{"/static/" + name, "/static/" + name + "?v=0123456789abcdef"} {
			if p := newBrowser(t, s.URL).get(other); p.Status != http.StatusOK || p.Header.Get("Cache-Control") != "public, max-age=300" {
				t.Errorf("GET %s: %d Cache-Control %q, want 200 cached 5 minutes", other, p.Status, p.Header.Get("Cache-Control"))
			}
		}
	}
}
