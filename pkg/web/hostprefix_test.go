package web_test

import (
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/node"
)

// tlsBrowser is a browser of s's UI served over TLS (a second, TLS
// listener of the same server on loopback).
func tlsBrowser(t *testing.T, s *uiServer) (*browser, *httptest.Server) {
	t.Helper()
	ts := httptest.NewUnstartedServer(s.Node.API)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: ts.URL, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: ts.Client().Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, ts
}

// setCookies are the cookies of p's Set-Cookie headers by name.
func setCookies(p page) map[string]*http.Cookie {
	out := map[string]*http.Cookie{}
	for _, c := range (&http.Response{Header: p.Header}).Cookies() {
		out[c.Name] = c
	}
	return out
}

// hostCookie checks that c is a valid __Host- cookie: Secure, Path=/, no
// Domain (what browsers require of the prefix).
func hostCookie(t *testing.T, what string, c *http.Cookie) {
	t.Helper()
	if c == nil {
		t.Fatalf("%s: no cookie", what)
	}
	if !strings.HasPrefix(c.Name, "__Host-") || !c.Secure || c.Path != "/" || c.Domain != "" || !c.HttpOnly {
		t.Errorf("%s: %+v, want __Host-, Secure, Path=/, no Domain, HttpOnly", what, c)
	}
}

// Over HTTPS (TLS to the server, or a proxy saying X-Forwarded-Proto:
// https) the UI's cookies carry the __Host- prefix, so no sibling
// subdomain or plain-HTTP page can set one the server would read (session
// fixation, login CSRF); the unprefixed name is then not read. Over plain
// HTTP the names stay as they are.
func TestHostPrefixedCookiesOverHTTPS(t *testing.T) {
	is := newCodeIssuer(t, "olga@example.com", []string{"sre"})
	s := startUI(t, func(c *node.Config) {
		c.Auth.OIDC = &auth.OIDCConfig{Issuer: is.srv.URL, Audience: "manent-ui", ClientID: "manent-ui"}
	})
	b, _ := tlsBrowser(t, s)

	form := b.get("/login")
	hostCookie(t, "sign-in form over TLS", setCookies(form)["__Host-manent_login"])
	p := b.do("POST", "/login", url.Values{"csrf": {csrf(t, form)}, "token": {"alice-token"}, "next": {"/"}})
	if p.Status != http.StatusSeeOther {
		t.Fatalf("sign in over TLS: %d\n%s", p.Status, p.Body)
	}
	sc := setCookies(p)
	hostCookie(t, "session over TLS", sc["__Host-manent_session"])
	if sc["manent_session"] != nil {
		t.Errorf("an unprefixed session cookie over TLS: %+v", sc["manent_session"])
	}
	session := sc["__Host-manent_session"].Value
	home := b.get("/")
	if home.Status != http.StatusOK || !strings.Contains(home.Body, "token:alice") {
		t.Fatalf("a page over TLS with the __Host- cookie: %d", home.Status)
	}

	// The same value under the unprefixed name (what a sibling subdomain
	// could set) is not a session over HTTPS.
	req, _ := http.NewRequest("GET", b.base+"/environments", nil)
	req.AddCookie(&http.Cookie{Name: "manent_session", Value: session})
	resp, err := b.hc.Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("an unprefixed session cookie over TLS: %d, want 303 to /login", resp.StatusCode)
	}

	// The sign-in page drops such a cookie (one of a version without the
	// prefix), over HTTPS.
	req, _ = http.NewRequest("GET", b.base+"/login", nil)
	req.AddCookie(&http.Cookie{Name: "manent_session", Value: session})
	resp, err = b.hc.Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c := setCookies(page{Header: resp.Header})["manent_session"]; c == nil || c.MaxAge >= 0 {
		t.Errorf("GET /login over TLS with an unprefixed session cookie: Set-Cookie %v, want it dropped", resp.Header["Set-Cookie"])
	}

	// Behind a proxy that says https: the same names, and the prefixed
	// cookie is the one read.
	xfp := []string{"X-Forwarded-Proto", "https"}
	plain := newBrowser(t, s.URL)
	f2 := plain.do("GET", "/login", nil, xfp...)
	hostCookie(t, "sign-in form behind a TLS proxy", setCookies(f2)["__Host-manent_login"])
	req, _ = http.NewRequest("GET", s.URL+"/environments", nil)
	req.Header.Set("X-Forwarded-Proto", "https")
	req.AddCookie(&http.Cookie{Name: "__Host-manent_session", Value: session})
	resp, err = http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the __Host- cookie behind a TLS proxy: %d, want 200", resp.StatusCode)
	}
	// Over plain HTTP the unprefixed name is the one in use.
	if p := replay(t, s.URL, session, "GET", "/environments", nil); p.Status != http.StatusOK {
		t.Errorf("the session under its plain-HTTP name over plain HTTP: %d", p.Status)
	}
	req, _ = http.NewRequest("GET", s.URL+"/environments", nil)
	req.AddCookie(&http.Cookie{Name: "__Host-manent_session", Value: session})
	resp, err = http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a __Host- cookie over plain HTTP: %d, want 303 to /login", resp.StatusCode)
	}

	// Sign-out over TLS clears the prefixed cookie.
	out := b.do("POST", "/logout", url.Values{"csrf": {csrf(t, home)}})
	if c := setCookies(out)["__Host-manent_session"]; out.Status != http.StatusSeeOther || c == nil || c.MaxAge >= 0 || !c.Secure {
		t.Errorf("sign out over TLS: %d %v", out.Status, out.Header["Set-Cookie"])
	}

	// OIDC over TLS: the state cookie is prefixed too, and read back at
	// the callback.
	start := b.get("/login/oidc?next=%2F")
	hostCookie(t, "OIDC state over TLS", setCookies(start)["__Host-manent_oidc"])
	if c := setCookies(start)["__Host-manent_oidc"]; c != nil && c.SameSite != http.SameSiteLaxMode {
		t.Errorf("OIDC state cookie %+v: want SameSite=Lax", c)
	}
	r2, err := b.hc.Get(start.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	cb, _ := url.Parse(r2.Header.Get("Location"))
	if !strings.HasPrefix(cb.String(), b.base+"/login/callback?") {
		t.Fatalf("the issuer sent the browser to %q", cb)
	}
	p = b.get("/login/callback?" + cb.RawQuery)
	if p.Status != http.StatusOK {
		t.Fatalf("OIDC callback over TLS: %d\n%s", p.Status, p.Body)
	}
	hostCookie(t, "OIDC session over TLS", setCookies(p)["__Host-manent_session"])
	if a := b.get("/audit"); a.Status != http.StatusOK || !strings.Contains(a.Body, "oidc:olga@example.com") {
		t.Errorf("after the OIDC sign-in over TLS: %d", a.Status)
	}
}
