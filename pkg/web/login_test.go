package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/node"
)

// The sign-in page shows only messages the server chose: ?error= is a
// code, and text an attacker puts there (a phishing line in a link to the
// real server) is never shown. A session that is no longer honoured sends
// the browser to /login with the code that says so.
func TestLoginErrorIsACode(t *testing.T) {
	s := startUI(t)
	b := newBrowser(t, s.URL)
	const phish = "Your session expired. Call +1 555 0100 to restore access"
	for _, q := range []string{
		"error=" + url.QueryEscape(phish),
		"next=%2F&error=" + url.QueryEscape(phish),
		"error=" + url.QueryEscape("<b>"+phish+"</b>"),
		"error=session_ended%20" + url.QueryEscape(phish), // a known code with more after it
	} {
		p := b.get("/login?" + q)
		if p.Status != http.StatusOK {
			t.Fatalf("GET /login?%s: %d", q, p.Status)
		}
		if strings.Contains(p.Body, "555 0100") || strings.Contains(p.Body, `role="alert"`) {
			t.Errorf("GET /login?%s shows the attacker's text:\n%s", q, p.Body)
		}
	}
	// A code the server uses shows its own text.
	if p := b.get("/login?error=session_ended"); p.Status != http.StatusOK || !strings.Contains(p.Body, `<p class="alert" role="alert">Your session has ended`) {
		t.Errorf("GET /login?error=session_ended: %d\n%s", p.Status, p.Body)
	}

	// A signed-out session's cookie sent to a page: to /login with that code.
	a := newBrowser(t, s.URL)
	a.login("alice-token")
	copied := a.sessionCookie(s.URL)
	if p := a.do("POST", "/logout", url.Values{"csrf": {csrf(t, a.get("/"))}}); p.Status != http.StatusSeeOther {
		t.Fatalf("sign out: %d", p.Status)
	}
	p := replay(t, s.URL, copied, "GET", "/environments", nil)
	if loc := p.Header.Get("Location"); p.Status != http.StatusSeeOther || loc != "/login?next=%2Fenvironments&error=session_ended" {
		t.Errorf("a page with a signed-out cookie: %d %q", p.Status, loc)
	}
	// Signed in, the message would not be true: on to next.
	if p := a.login("alice-token"); p.Status != http.StatusSeeOther {
		t.Fatal(p.Status)
	}
	if p := a.get("/login?next=%2Faudit&error=session_ended"); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/audit" {
		t.Errorf("GET /login?error=session_ended signed in: %d %q", p.Status, p.Header.Get("Location"))
	}
	// Without any cookie there is nothing to explain.
	if loc := newBrowser(t, s.URL).get("/environments").Header.Get("Location"); loc != "/login?next=%2Fenvironments" {
		t.Errorf("a page without a session: %q", loc)
	}
}

// The OIDC callback's error answer is the issuer's, but anyone can craft
// the URL (and a browser that just started a sign-in holds the cookie it
// needs): the page names only a standard error code, never the URL's text.
func TestOIDCCallbackErrorIsNotReflected(t *testing.T) {
	is := newCodeIssuer(t, "olga@example.com", []string{"sre"})
	s := startUI(t, func(c *node.Config) {
		c.Auth.OIDC = &auth.OIDCConfig{Issuer: is.srv.URL, Audience: "manent-ui", ClientID: "manent-ui"}
	})
	b := newBrowser(t, s.URL)
	const phish = "Your account is locked. Call +1 555 0100"
	for _, q := range []url.Values{
		{"error": {"access_denied"}, "error_description": {phish}},
		{"error": {phish}},
		{"error": {"access_denied " + phish}},
	} {
		if p := b.get("/login/oidc?next=%2F"); p.Status != http.StatusFound {
			t.Fatalf("GET /login/oidc: %d", p.Status)
		}
		p := b.get("/login/callback?" + q.Encode())
		if p.Status != http.StatusUnauthorized || !strings.Contains(p.Body, "The identity provider refused the sign-in") {
			t.Fatalf("callback %v: %d\n%s", q, p.Status, p.Body)
		}
		if strings.Contains(p.Body, "555 0100") {
			t.Errorf("callback %v shows the URL's text:\n%s", q, p.Body)
		}
	}
	// A standard code is named.
	b.get("/login/oidc?next=%2F")
	if p := b.get("/login/callback?error=access_denied"); !strings.Contains(p.Body, "(access_denied)") {
		t.Errorf("callback with access_denied:\n%s", p.Body)
	}
}
