package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/node"
)

// maxBrowserCookie is what browsers keep of one cookie, name and value
// (RFC 6265 §6.1 asks for at least 4096 bytes; Chromium and Firefox keep
// no more): a longer Set-Cookie is dropped without a word.
const maxBrowserCookie = 4096

// An identity provider that puts many groups in its ID tokens makes one
// too large for the session cookie, which holds it sealed. The browser
// would drop that cookie and land on the sign-in page again with nothing
// said, while the audit log recorded a sign-in. The sign-in is refused
// instead, saying why and what to change; nothing is audited, and the
// session the browser held goes on (a sign-in that fails ends nothing).
func TestOversizedIDTokenIsRefusedWithAReason(t *testing.T) {
	groups := make([]string, 120)
	for i := range groups {
		groups[i] = fmt.Sprintf("team-platform-engineering-%03d", i)
	}
	is := newCodeIssuer(t, "olga@example.com", append(groups, "sre"))
	s := startUI(t, func(c *node.Config) {
		c.Auth.OIDC = &auth.OIDCConfig{Issuer: is.srv.URL, Audience: "manent-ui", ClientID: "manent-ui"}
	})
	b := newBrowser(t, s.URL)
	b.login("alice-token")
	start := b.get("/login/oidc?next=%2F")
	resp, err := b.hc.Get(start.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cb, _ := url.Parse(resp.Header.Get("Location"))
	p := b.get("/login/callback?" + cb.RawQuery)
	for _, c := range (&http.Response{Header: p.Header}).Cookies() {
		if c.Name == "manent_session" && c.Value != "" {
			if n := len(c.Name) + len(c.Value); n > maxBrowserCookie {
				t.Errorf("the session cookie is %d bytes: a browser keeps %d and drops it silently", n, maxBrowserCookie)
			}
		}
	}
	if p.Status == http.StatusOK {
		t.Fatalf("callback with a %d-group ID token: 200, want a refusal\n%s", len(groups), p.Body)
	}
	if !strings.Contains(p.Body, "too large") || !strings.Contains(p.Body, "groups") {
		t.Errorf("the refusal does not say why:\n%s", p.Body)
	}
	for _, e := range s.auditOf(t, "web.sign-in") {
		if e.Identity != "token:alice" {
			t.Errorf("a sign-in whose cookie the browser cannot keep was audited: %+v", e)
		}
	}
	if p := b.get("/"); p.Status != http.StatusOK || !strings.Contains(p.Body, "token:alice") {
		t.Errorf("the session held before the refused sign-in: %d, want it going on", p.Status)
	}
	if ended := s.auditOf(t, "web.sign-out"); len(ended) != 0 {
		t.Errorf("the refused sign-in ended the session held before: %+v", ended)
	}
}
