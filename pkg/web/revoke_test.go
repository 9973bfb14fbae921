package web_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/web"
)

// sessionCookie returns the manent_session cookie b's jar holds for base.
func (b *browser) sessionCookie(base string) string {
	b.t.Helper()
	u, _ := url.Parse(base)
	for _, c := range b.hc.Jar.Cookies(u) {
		if c.Name == "manent_session" {
			return c.Value
		}
	}
	b.t.Fatal("no session cookie in the browser")
	return ""
}

// replay sends a request with only the given session cookie (a copy used
// from elsewhere: another machine, a proxy log) and returns the answer.
func replay(t *testing.T, base, cookie, method, path string, form url.Values) page {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.AddCookie(&http.Cookie{Name: "manent_session", Value: cookie})
	hc := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return page{Status: resp.StatusCode, Header: resp.Header, Body: string(data)}
}

// refused checks that a copy of a session cookie opens nothing: a page
// sends it to /login, a form POST (an action, sign-out) is 403, the event
// stream 401.
func refused(t *testing.T, base, cookie, csrfToken, what string) {
	t.Helper()
	if p := replay(t, base, cookie, "GET", "/environments", nil); p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/login?next=") {
		t.Errorf("%s: GET /environments: %d %q, want 303 to /login", what, p.Status, p.Header.Get("Location"))
	}
	if p := replay(t, base, cookie, "POST", "/deployments/dpl_x/cancel", url.Values{"csrf": {csrfToken}}); p.Status != http.StatusForbidden {
		t.Errorf("%s: POST cancel: %d, want 403", what, p.Status)
	}
	if p := replay(t, base, cookie, "POST", "/logout", url.Values{"csrf": {csrfToken}}); p.Status != http.StatusForbidden {
		t.Errorf("%s: POST /logout: %d, want 403", what, p.Status)
	}
	if p := replay(t, base, cookie, "GET", "/events", nil); p.Status != http.StatusUnauthorized {
		t.Errorf("%s: GET /events: %d, want 401", what, p.Status)
	}
}

// Sign-out revokes the session on the server: a copy of the cookie taken
// before is refused afterwards — on this worker and, on PostgreSQL, on
// another worker of the same database — while another session of the same
// user goes on working.
func TestSignOutRevokesCopies(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		s := startUI(t, func(c *node.Config) { c.Database = db })
		workers := []*uiServer{s}
		if strings.HasPrefix(db, "postgres") {
			key, err := os.ReadFile(filepath.Join(s.DataDir, node.WebKeyFile))
			if err != nil {
				t.Fatal(err)
			}
			workers = append(workers, startUI(t, func(c *node.Config) {
				c.Database, c.ExecutorID = db, "webtest-2"
				if err := os.MkdirAll(c.DataDir, 0o750); err != nil {
					t.Fatal(err)
				}
				// Workers behind one address share the session key.
				if err := os.WriteFile(filepath.Join(c.DataDir, node.WebKeyFile), key, 0o600); err != nil {
					t.Fatal(err)
				}
			}))
		}

		a := newBrowser(t, s.URL)
		a.login("alice-token")
		home := a.get("/")
		tokA := csrf(t, home)
		copied := a.sessionCookie(s.URL)
		other := newBrowser(t, s.URL) // alice again, in another browser
		other.login("alice-token")
		tokOther := csrf(t, other.get("/"))
		otherCookie := other.sessionCookie(s.URL)

		// Before sign-out the copy works anywhere (so the checks below can fail).
		for _, w := range workers {
			if p := replay(t, w.URL, copied, "GET", "/environments", nil); p.Status != 200 || !strings.Contains(p.Body, "token:alice") {
				t.Fatalf("the copied cookie before sign-out on %s: %d", w.URL, p.Status)
			}
		}

		p := a.do("POST", "/logout", url.Values{"csrf": {tokA}})
		if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/login" {
			t.Fatalf("sign out: %d %q", p.Status, p.Header.Get("Location"))
		}
		var rows int
		if err := s.Store.ReadDB().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM manent_revoked_sessions`).Scan(&rows); err != nil || rows != 1 {
			t.Fatalf("revoked sessions: %d, %v; want 1 row", rows, err)
		}
		for i, w := range workers {
			refused(t, w.URL, copied, tokA, "worker "+string(rune('1'+i))+" after sign-out")
		}
		if p := a.get("/"); p.Status != http.StatusSeeOther {
			t.Errorf("the signed-out browser: %d, want 303", p.Status)
		}
		// The sign-in page drops a cookie that is no longer honoured.
		if p := replay(t, s.URL, copied, "GET", "/login", nil); p.Status != 200 || !strings.Contains(p.Header.Get("Set-Cookie"), "manent_session=;") {
			t.Errorf("GET /login with a revoked cookie: %d, Set-Cookie %q", p.Status, p.Header.Get("Set-Cookie"))
		}

		// Alice's other session is untouched, on every worker: pages, and
		// forms get past the session and CSRF checks to the API (404 for a
		// deploy that does not exist, not 403).
		for _, w := range workers {
			if p := replay(t, w.URL, otherCookie, "GET", "/environments", nil); p.Status != 200 || !strings.Contains(p.Body, "token:alice") {
				t.Fatalf("alice's other session on %s: %d", w.URL, p.Status)
			}
			if p := replay(t, w.URL, otherCookie, "POST", "/deployments/dpl_nope/cancel", url.Values{"csrf": {tokOther}}); p.Status != http.StatusNotFound {
				t.Fatalf("alice's other session posts cancel on %s: %d, want the API's 404", w.URL, p.Status)
			}
		}
		// Signed in again, alice has a new session that works.
		a.login("alice-token")
		if p := a.get("/"); p.Status != 200 {
			t.Fatalf("signed in again: %d", p.Status)
		}
		// Signing out the other session from the last worker revokes it everywhere.
		last := workers[len(workers)-1]
		if p := replay(t, last.URL, otherCookie, "POST", "/logout", url.Values{"csrf": {tokOther}}); p.Status != http.StatusSeeOther {
			t.Fatalf("sign out of the other session on %s: %d", last.URL, p.Status)
		}
		for i, w := range workers {
			refused(t, w.URL, otherCookie, tokOther, "the other session on worker "+string(rune('1'+i)))
		}
		if p := a.get("/"); p.Status != 200 {
			t.Fatalf("alice's new session after the other's sign-out: %d", p.Status)
		}
	})
}

// What an attacker can send instead of a session cookie — garbled, huge,
// or sealed with the server's key but with a forged id, or with none (a
// cookie sealed before sessions had ids) — opens nothing and never makes
// a 500.
func TestForgedSessionCookies(t *testing.T) {
	s := startUI(t)
	secret, err := web.LoadSecret(filepath.Join(s.DataDir, node.WebKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Unix()
	seal := func(v map[string]any) string {
		t.Helper()
		c, err := web.SealSession(secret, v)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	fields := func(id any) map[string]any {
		m := map[string]any{"c": "alice-token", "m": "token", "x": "csrf-token-of-the-forgery", "e": exp}
		if id != nil {
			m["i"] = id
		}
		return m
	}
	// The key and the sealing are right: a well-formed id opens a session.
	goodID := base64.RawURLEncoding.EncodeToString(make([]byte, 16))
	if p := replay(t, s.URL, seal(fields(goodID)), "GET", "/environments", nil); p.Status != 200 {
		t.Fatalf("a well-formed forged session (the key holder's): %d", p.Status)
	}
	junk := make([]byte, 3000)
	_, _ = rand.Read(junk)
	cases := map[string]string{
		"sealed before sessions had ids": seal(fields(nil)),
		"empty id":                       seal(fields("")),
		"short id":                       seal(fields("abc")),
		"standard-base64 id":             seal(fields("AAAAAAAAAAAAAAAAAAAA+/")),
		"id of 64 KiB":                   seal(fields(strings.Repeat("A", 64<<10))),
		"id with NUL and quotes":         seal(fields("\x00' OR 1=1 --\"\x00\x00\x00")),
		"numeric id":                     seal(fields(12345)),
		"id object":                      seal(fields(map[string]any{"a": 1})),
		"random bytes":                   base64.RawURLEncoding.EncodeToString(junk),
		"not base64":                     "%%%***!!!",
		"empty":                          "",
		"200 KiB":                        strings.Repeat("A", 200<<10),
	}
	flipped := []byte(seal(fields(goodID)))
	flipped[len(flipped)/2] ^= 1
	cases["a flipped byte"] = string(flipped)
	for name, c := range cases {
		refused(t, s.URL, c, "csrf-token-of-the-forgery", name)
	}
	// A cookie beyond the server's header limit (1 MiB): net/http's 431.
	if p := replay(t, s.URL, strings.Repeat("A", 2<<20), "GET", "/", nil); p.Status >= 500 || p.Status < 400 {
		t.Errorf("a 2 MiB cookie: %d, want a 4xx", p.Status)
	}
	// The server is still up.
	b := newBrowser(t, s.URL)
	b.login("bob-token")
	if p := b.get("/"); p.Status != 200 {
		t.Fatalf("after the forgeries: %d", p.Status)
	}
}

// When the revocation check cannot be made (here: its table is gone),
// requests with a session are answered 503 with a clear message — not let
// in, not sent to sign in again, no 500.
func TestSessionCheckFailsClosed(t *testing.T) {
	s := startUI(t)
	b := newBrowser(t, s.URL)
	b.login("alice-token")
	tok := csrf(t, b.get("/"))
	if _, err := s.Store.DB().ExecContext(context.Background(), `DROP TABLE manent_revoked_sessions`); err != nil {
		t.Fatal(err)
	}
	if p := b.get("/environments"); p.Status != http.StatusServiceUnavailable || !strings.Contains(p.Body, "could not be checked") {
		t.Errorf("GET /environments: %d\n%s", p.Status, p.Body)
	}
	if p := b.do("POST", "/deployments/dpl_x/cancel", url.Values{"csrf": {tok}}); p.Status != http.StatusServiceUnavailable {
		t.Errorf("POST cancel: %d", p.Status)
	}
	if p := b.get("/events"); p.Status != http.StatusServiceUnavailable {
		t.Errorf("GET /events: %d", p.Status)
	}
	if p := b.do("POST", "/logout", url.Values{"csrf": {tok}}); p.Status != http.StatusServiceUnavailable || strings.Contains(p.Header.Get("Set-Cookie"), "manent_session=;") {
		t.Errorf("POST /logout: %d (Set-Cookie %q): want 503 and the cookie kept", p.Status, p.Header.Get("Set-Cookie"))
	}
	// Without a session nothing is asked of the database: /login is served.
	if p := newBrowser(t, s.URL).get("/login"); p.Status != 200 {
		t.Errorf("GET /login without a session: %d", p.Status)
	}
}
