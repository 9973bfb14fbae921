package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/node"
)

// loginForm gives b a sign-in form even while it is signed in (GET /login
// would send it on): the form and CSRF cookie another browser got, as a
// second tab opened before the first signed in would hold.
func (b *browser) loginForm(base string) string {
	b.t.Helper()
	other := newBrowser(b.t, base)
	form := other.get("/login")
	u, _ := url.Parse(base)
	b.hc.Jar.SetCookies(u, other.hc.Jar.Cookies(u))
	return csrf(b.t, form)
}

// Signing in again while a session cookie is present ends that session on
// the server: a copy of the old cookie opens nothing afterwards, whoever
// signs in (the same identity or another), and the audit log says so.
func TestSignInAgainRevokesThePreviousSession(t *testing.T) {
	s := startUI(t)
	for _, second := range []string{"alice-token", "bob-token"} {
		b := newBrowser(t, s.URL)
		b.login("alice-token")
		oldCSRF := csrf(t, b.get("/"))
		old := b.sessionCookie(s.URL)
		tok := b.loginForm(s.URL)
		p := b.do("POST", "/login", url.Values{"csrf": {tok}, "token": {second}, "next": {"/"}})
		if p.Status != http.StatusSeeOther {
			t.Fatalf("sign in again as %s: %d\n%s", second, p.Status, p.Body)
		}
		if b.sessionCookie(s.URL) == old {
			t.Fatal("the session cookie did not change")
		}
		refused(t, s.URL, old, oldCSRF, "the session before signing in again as "+second)
		if pg := b.get("/"); pg.Status != http.StatusOK {
			t.Fatalf("the new session: %d", pg.Status)
		}
	}
	outs := s.auditOf(t, "web.sign-out")
	if len(outs) != 2 {
		t.Fatalf("web.sign-out entries %+v, want one per replaced session", outs)
	}
	for _, e := range outs {
		if e.Identity != "token:alice" || !strings.Contains(e.Detail, "replaced by a new sign-in") {
			t.Errorf("sign-out entry %+v", e)
		}
	}
}

// The same through the identity provider: the callback comes from the
// issuer's site, so the browser does not send the (SameSite=Strict)
// session cookie there; the session it held when the sign-in started is
// ended when the callback signs in.
func TestOIDCSignInRevokesThePreviousSession(t *testing.T) {
	is := newCodeIssuer(t, "olga@example.com", []string{"sre"})
	s := startUI(t, func(c *node.Config) {
		c.Auth.OIDC = &auth.OIDCConfig{Issuer: is.srv.URL, Audience: "manent-ui", ClientID: "manent-ui"}
	})
	b := newBrowser(t, s.URL)
	b.login("alice-token")
	oldCSRF := csrf(t, b.get("/"))
	old := b.sessionCookie(s.URL)
	start := b.get("/login/oidc?next=%2F")
	resp, err := b.hc.Get(start.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cb, _ := url.Parse(resp.Header.Get("Location"))
	// What the browser sends on the cross-site redirect: no session cookie.
	req, _ := http.NewRequest("GET", s.URL+"/login/callback?"+cb.RawQuery, nil)
	u, _ := url.Parse(s.URL)
	for _, c := range b.hc.Jar.Cookies(u) {
		if c.Name != "manent_session" {
			req.AddCookie(c)
		}
	}
	r2, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusOK {
		t.Fatalf("callback: %d", r2.StatusCode)
	}
	refused(t, s.URL, old, oldCSRF, "the token session before the OIDC sign-in")
	if outs := s.auditOf(t, "web.sign-out"); len(outs) != 1 || outs[0].Identity != "token:alice" {
		t.Fatalf("web.sign-out entries %+v", outs)
	}
}
