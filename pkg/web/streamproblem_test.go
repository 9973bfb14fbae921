package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/api"
)

// The UI's event streams (/events, /deployments/{id}/events) are read by
// scripts, not shown as pages: a stream refused for want of a session
// answers a problem+json document that says why and what to do, as every
// other error of a stream (the API's 403, 404, 422, 429). It answered
// text/plain "sign in first", whether the browser had no session cookie or
// one that was signed out.
func TestStreamWithoutSessionIsAProblem(t *testing.T) {
	s := startUI(t)
	b := newBrowser(t, s.URL)
	b.login("vera-token")
	cookie := b.sessionCookie(s.URL)
	csrfToken := csrf(t, b.get("/"))
	if p := b.do(http.MethodPost, "/logout", url.Values{"csrf": {csrfToken}}); p.Status != http.StatusSeeOther {
		t.Fatalf("sign out: %d", p.Status)
	}
	for _, c := range []struct {
		what, cookie, want string
	}{
		{"no session cookie", "", "sign in"},
		{"a signed-out session", cookie, "session has ended"},
	} {
		for _, path := range []string{"/events", "/deployments/dpl_01JABCDEFGHJKMNPQRSTVWXYZ0/events"} {
			p := newBrowser(t, s.URL).get(path)
			if c.cookie != "" {
				p = replay(t, s.URL, c.cookie, http.MethodGet, path, nil)
			}
			if p.Status != http.StatusUnauthorized {
				t.Errorf("%s, GET %s: %d, want 401", c.what, path, p.Status)
				continue
			}
			if ct := p.Header.Get("Content-Type"); ct != api.ProblemContentType {
				t.Errorf("%s, GET %s: Content-Type %q, want %s (body %q)", c.what, path, ct, api.ProblemContentType, p.Body)
				continue
			}
			var pr api.Problem
			if err := json.Unmarshal([]byte(p.Body), &pr); err != nil {
				t.Errorf("%s, GET %s: %v: %q", c.what, path, err, p.Body)
				continue
			}
			if pr.Status != http.StatusUnauthorized || pr.Title != "Unauthorized" || !strings.Contains(pr.Detail, c.want) || !strings.Contains(pr.Detail, "/login") {
				t.Errorf("%s, GET %s: %+v, want a 401 whose detail says %q and names /login", c.what, path, pr, c.want)
			}
		}
	}
}
