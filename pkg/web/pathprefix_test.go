package web_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// prefixHost is a host that mounts manent under prefix and strips it, as
// nginx's `location /manent/ { proxy_pass http://127.0.0.1:8080/; }` does
// (docs/operations.md), beside another application of the host at /:
// it records the cookies the browser sends that application.
type prefixHost struct {
	srv *httptest.Server
	mu  sync.Mutex
	// otherCookies are the Cookie headers the other application got.
	otherCookies []string
}

func newPrefixHost(t *testing.T, target, prefix string, tls bool) *prefixHost {
	t.Helper()
	to, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{FlushInterval: -1, Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(to)
		pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, prefix)
		pr.Out.URL.RawPath = strings.TrimPrefix(pr.In.URL.RawPath, prefix)
		pr.Out.Host = pr.In.Host // proxy_set_header Host $host
		pr.SetXForwarded()       // X-Forwarded-Proto: https behind TLS
	}}
	h := &prefixHost{}
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", rp)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.otherCookies = append(h.otherCookies, r.Header.Get("Cookie"))
		h.mu.Unlock()
		http.Error(w, "another application of this host", http.StatusNotFound)
	})
	h.srv = httptest.NewUnstartedServer(mux)
	if tls {
		h.srv.StartTLS()
	} else {
		h.srv.Start()
	}
	t.Cleanup(h.srv.Close)
	return h
}

// browser is a cookie-keeping browser of the host (not following redirects).
func (h *prefixHost) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: h.srv.URL, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: h.srv.Client().Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// addressRE finds the addresses a page gives the browser.
var addressRE = regexp.MustCompile(`(?:href|action|formaction|src|data-stream|data-base)="([^"]*)"`)

// underPrefix checks that every address of p is under prefix (or within
// the page: #…, ?…).
func underPrefix(t *testing.T, what string, p page, prefix string) {
	t.Helper()
	ms := addressRE.FindAllStringSubmatch(p.Body, -1)
	if len(ms) == 0 {
		t.Fatalf("%s: no address in the page (%d):\n%s", what, p.Status, p.Body)
	}
	for _, m := range ms {
		a := strings.ReplaceAll(m[1], "&amp;", "&")
		if a == prefix || strings.HasPrefix(a, prefix+"/") || strings.HasPrefix(a, "#") || strings.HasPrefix(a, "?") {
			continue
		}
		t.Errorf("%s: %q is not under %s", what, m[0], prefix)
	}
}

// The web UI behind a proxy that mounts it at /manent/ and strips the
// prefix (web.path_prefix: /manent): every link, form, redirect and stream
// of its pages is under /manent, a sign-in returns to the page asked for
// (and never outside /manent), and its cookies are scoped to /manent — the
// other applications of the host do not get the session.
func TestUIUnderAPathPrefix(t *testing.T) {
	s := startUI(t, func(c *node.Config) { c.Web.PathPrefix = "/manent" })
	host := newPrefixHost(t, s.URL, "/manent", false)
	b := host.browser(t)

	gate := s.gate(t, "g")
	t.Cleanup(func() { open(t, gate) })
	id := s.submit(t, "alice-token", gatedDeploy(t, "staging", "7.1", gate))
	s.waitState(t, id, manent.StatePending)

	// Not signed in: to the sign-in page, with the page to return to.
	p := b.get("/manent/deployments/" + id + "?x=1")
	want := "/manent/login?next=" + url.QueryEscape("/manent/deployments/"+id+"?x=1")
	if p.Status != http.StatusSeeOther || p.Header.Get("Location") != want {
		t.Fatalf("a page without a session: %d to %q, want 303 to %q", p.Status, p.Header.Get("Location"), want)
	}
	form := b.get(p.Header.Get("Location"))
	if form.Status != http.StatusOK {
		t.Fatalf("the sign-in page: %d\n%s", form.Status, form.Body)
	}
	underPrefix(t, "the sign-in page", form, "/manent")
	if c := setCookies(form)["manent_login"]; c == nil || c.Path != "/manent" {
		t.Errorf("the sign-in form's cookie: %+v, want Path=/manent", c)
	}
	if !strings.Contains(form.Body, `name="next" value="/manent/deployments/`+id+`?x=1"`) {
		t.Errorf("the sign-in form does not return to the page asked for:\n%s", form.Body)
	}

	// Sign-ins that would leave /manent land on its activity page.
	for _, next := range []string{"/other/app", "/manent/../other/app", "/manent/%2e%2e/other", "/manent/.%2E/other", `/manent/..\other`,
		"https://evil.example/manent/", "//evil.example/manent/", "/manentx", ""} {
		nb := host.browser(t)
		f := nb.get("/manent/login")
		o := nb.do("POST", "/manent/login", url.Values{"csrf": {csrf(t, f)}, "token": {"alice-token"}, "next": {next}})
		if o.Status != http.StatusSeeOther || o.Header.Get("Location") != "/manent/" {
			t.Errorf("sign in with next=%q: %d to %q, want 303 to /manent/", next, o.Status, o.Header.Get("Location"))
		}
	}
	f := b.get("/manent/login")
	in := b.do("POST", "/manent/login", url.Values{"csrf": {csrf(t, f)}, "token": {"alice-token"}, "next": {"/manent/deployments/" + id}})
	if in.Status != http.StatusSeeOther || in.Header.Get("Location") != "/manent/deployments/"+id {
		t.Fatalf("sign in: %d to %q", in.Status, in.Header.Get("Location"))
	}
	if c := setCookies(in)["manent_session"]; c == nil || c.Path != "/manent" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Errorf("the session cookie: %+v, want Path=/manent, HttpOnly, SameSite=Strict", c)
	}

	// Every page's addresses are under the prefix.
	dp := b.get("/manent/deployments/" + id)
	if dp.Status != http.StatusOK || !strings.Contains(dp.Body, "token:alice") {
		t.Fatalf("the deploy page: %d\n%s", dp.Status, dp.Body)
	}
	underPrefix(t, "the deploy page", dp, "/manent")
	if !strings.Contains(dp.Body, `data-base="/manent"`) || !strings.Contains(dp.Body, `data-stream="/manent/deployments/`+id+`/events?`) {
		t.Errorf("the deploy page does not follow its stream under /manent")
	}
	for _, path := range []string{"/", "/environments", "/environments/billing/staging", "/clusters", "/schedules", "/audit", "/logout", "/nowhere"} {
		underPrefix(t, "page "+path, b.get("/manent"+path), "/manent")
	}

	// The stream answers through the proxy.
	req, _ := http.NewRequest("GET", host.srv.URL+"/manent/deployments/"+id+"/events", nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := b.hc.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("the deploy's stream through the proxy: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc, seen := bufio.NewScanner(resp.Body), false
	for !seen && sc.Scan() {
		seen = strings.Contains(sc.Text(), "preparing 7.1")
	}
	resp.Body.Close()
	if !seen {
		t.Errorf("the stream through the proxy did not carry the log line: %v", sc.Err())
	}

	// The script, its stylesheet and icon are there.
	for _, a := range []string{"/manent/static/app.js", "/manent/static/app.css", "/manent/static/favicon.svg"} {
		if p := b.get(a); p.Status != http.StatusOK {
			t.Errorf("GET %s: %d", a, p.Status)
		}
	}

	// A button's form: back to the deploy's page under /manent.
	c := b.do("POST", "/manent/deployments/"+id+"/cancel", url.Values{"csrf": {csrf(t, dp)}})
	if c.Status != http.StatusSeeOther || c.Header.Get("Location") != "/manent/deployments/"+id {
		t.Errorf("cancel: %d to %q\n%s", c.Status, c.Header.Get("Location"), c.Body)
	}

	// The other application of the host never got manent's cookies.
	if o := b.get("/other/"); o.Status != http.StatusNotFound {
		t.Fatalf("the other application: %d", o.Status)
	}
	host.mu.Lock()
	for _, ck := range host.otherCookies {
		if strings.Contains(ck, "manent_") {
			t.Errorf("another application of the host got manent's cookies: %q", ck)
		}
	}
	host.mu.Unlock()

	// Sign-out: back to the sign-in page under /manent, the cookie dropped.
	home := b.get("/manent/")
	out := b.do("POST", "/manent/logout", url.Values{"csrf": {csrf(t, home)}})
	if out.Status != http.StatusSeeOther || out.Header.Get("Location") != "/manent/login" {
		t.Errorf("sign out: %d to %q", out.Status, out.Header.Get("Location"))
	}
	if c := setCookies(out)["manent_session"]; c == nil || c.MaxAge >= 0 || c.Path != "/manent" {
		t.Errorf("sign out: the session cookie %+v, want dropped at Path=/manent", c)
	}
	if p := b.get("/manent/environments"); p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/manent/login?") {
		t.Errorf("after sign-out: %d to %q", p.Status, p.Header.Get("Location"))
	}

	// A proxy that passes the prefix on: the 404 page says so.
	direct := newBrowser(t, s.URL)
	if p := direct.get("/manent/environments"); p.Status != http.StatusNotFound || !strings.Contains(p.Body, "reverse proxy in front of manent should remove") {
		t.Errorf("a request with the prefix left on: %d\n%s", p.Status, p.Body)
	}
}

// secureCookie checks that c is a __Secure- cookie scoped to the prefix:
// Secure, Path=prefix, no Domain, HttpOnly.
func secureCookie(t *testing.T, what string, c *http.Cookie, prefix string) {
	t.Helper()
	if c == nil {
		t.Fatalf("%s: no cookie", what)
	}
	if !strings.HasPrefix(c.Name, "__Secure-") || !c.Secure || c.Path != prefix || c.Domain != "" || !c.HttpOnly {
		t.Errorf("%s: %+v, want __Secure-, Secure, Path=%s, no Domain, HttpOnly", what, c, prefix)
	}
}

// Behind a TLS proxy under a prefix the UI's cookies are __Secure-
// (__Host- needs Path=/, which would send the session to every
// application of the host) with Path=/manent; only that name is read, and
// the OIDC sign-in's redirect URL is under the prefix.
func TestUIUnderAPathPrefixOverHTTPS(t *testing.T) {
	is := newCodeIssuer(t, "olga@example.com", []string{"sre"})
	s := startUI(t, func(c *node.Config) {
		c.Web.PathPrefix = "/tools/manent"
		c.Auth.OIDC = &auth.OIDCConfig{Issuer: is.srv.URL, Audience: "manent-ui", ClientID: "manent-ui"}
	})
	host := newPrefixHost(t, s.URL, "/tools/manent", true)
	b := host.browser(t)

	form := b.get("/tools/manent/login")
	secureCookie(t, "sign-in form", setCookies(form)["__Secure-manent_login"], "/tools/manent")
	in := b.do("POST", "/tools/manent/login", url.Values{"csrf": {csrf(t, form)}, "token": {"alice-token"}, "next": {"/tools/manent/environments"}})
	if in.Status != http.StatusSeeOther || in.Header.Get("Location") != "/tools/manent/environments" {
		t.Fatalf("sign in: %d to %q\n%s", in.Status, in.Header.Get("Location"), in.Body)
	}
	sc := setCookies(in)
	secureCookie(t, "session", sc["__Secure-manent_session"], "/tools/manent")
	session := sc["__Secure-manent_session"].Value
	if p := b.get("/tools/manent/"); p.Status != http.StatusOK || !strings.Contains(p.Body, "token:alice") {
		t.Fatalf("a page with the session: %d", p.Status)
	}

	// The same value under another name (unprefixed: anyone's; __Host-:
	// the UI's own before the prefix) is not a session.
	for _, name := range []string{"manent_session", "__Host-manent_session"} {
		req, _ := http.NewRequest("GET", host.srv.URL+"/tools/manent/environments", nil)
		req.AddCookie(&http.Cookie{Name: name, Value: session})
		resp, err := host.srv.Client().Transport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("the session under the name %s: %d, want 303 to the sign-in", name, resp.StatusCode)
		}
	}
	// The sign-in page drops a __Host- session of the UI from before the
	// prefix: it went to every application of the host.
	req, _ := http.NewRequest("GET", host.srv.URL+"/tools/manent/login", nil)
	req.AddCookie(&http.Cookie{Name: "__Host-manent_session", Value: session})
	resp, err := host.srv.Client().Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c := setCookies(page{Header: resp.Header})["__Host-manent_session"]; c == nil || c.MaxAge >= 0 || c.Path != "/" || !c.Secure {
		t.Errorf("GET the sign-in page with a __Host- session: Set-Cookie %v, want it dropped", resp.Header["Set-Cookie"])
	}

	// OIDC: the redirect URL the issuer gets is under the prefix, and the
	// sign-in comes back to the page asked for.
	start := b.get("/tools/manent/login/oidc?next=" + url.QueryEscape("/tools/manent/audit"))
	secureCookie(t, "OIDC state", setCookies(start)["__Secure-manent_oidc"], "/tools/manent")
	at, _ := url.Parse(start.Header.Get("Location"))
	if got, want := at.Query().Get("redirect_uri"), host.srv.URL+"/tools/manent/login/callback"; got != want {
		t.Errorf("redirect_uri %q, want %q", got, want)
	}
	r2, err := b.hc.Get(start.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	cb, _ := url.Parse(r2.Header.Get("Location"))
	p := b.get(cb.RequestURI())
	if p.Status != http.StatusOK || !strings.Contains(p.Body, `href="/tools/manent/audit"`) {
		t.Fatalf("OIDC callback under the prefix: %d\n%s", p.Status, p.Body)
	}
	secureCookie(t, "OIDC session", setCookies(p)["__Secure-manent_session"], "/tools/manent")
	if a := b.get("/tools/manent/audit"); a.Status != http.StatusOK || !strings.Contains(a.Body, "oidc:olga@example.com") {
		t.Errorf("after the OIDC sign-in: %d", a.Status)
	}
}

// In Chromium, behind a proxy that mounts the UI at /manent/: the sign-in
// returns to the deploy's page asked for, and the page follows the
// deploy's live log through the proxy.
func TestBrowserUnderAPathPrefix(t *testing.T) {
	exe := findBrowser(t)
	s := startUI(t, func(c *node.Config) { c.Web.PathPrefix = "/manent" })
	host := newPrefixHost(t, s.URL, "/manent", false)
	gate := s.gate(t, "g")
	t.Cleanup(func() { open(t, gate) })
	id := s.submit(t, "alice-token", gatedDeploy(t, "staging", "7.2", gate))
	s.waitState(t, id, manent.StatePending)

	bob := newChrome(t, exe)
	run(t, bob, "sign in from a link to the deploy",
		chromedp.Navigate(host.srv.URL+"/manent/deployments/"+id),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "bob-token"),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("log")),
	)
	if got := value(t, bob, "the address", chromedp.Evaluate[string](`location.pathname`)); got != "/manent/deployments/"+id {
		t.Fatalf("signed in at %q, want the deploy's page", got)
	}
	waitJS(t, bob, "the first log line", `document.getElementById('log').textContent.includes('preparing 7.2')`)
	open(t, gate)
	waitJS(t, bob, "the line written after the page was loaded", `document.getElementById('log').textContent.includes('gate opened for 7.2')`)
	s.waitState(t, id, manent.StateSuccess)
	waitJS(t, bob, "the final state without a reload", `document.querySelector('#live').textContent.toLowerCase().includes('success')`)
	run(t, bob, "go to the environments", chromedp.Click(chromedp.CSS(`nav a[href$="/environments"]`)), chromedp.WaitVisible(chromedp.CSS("table")))
	if got := value(t, bob, "the address", chromedp.Evaluate[string](`location.pathname`)); got != "/manent/environments" {
		t.Errorf("the navigation went to %q, want /manent/environments", got)
	}
}
