package web_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/plugins/builtin"
)

// Identities of the UI tests: alice and bob are SREs (submit, read,
// approve, cancel), vera may only read.
var (
	uiTokens = []auth.TokenConfig{
		{Name: "alice", SHA256: auth.HashToken("alice-token"), Groups: []string{"sre"}},
		{Name: "bob", SHA256: auth.HashToken("bob-token"), Groups: []string{"sre"}},
		{Name: "vera", SHA256: auth.HashToken("vera-token"), Groups: []string{"viewers"}},
	}
	uiRules = []auth.RBACRule{
		{Subjects: []string{"group:sre"}, Permissions: []string{"deployment.submit", "deployment.dry-run", "deployment.read",
			"deployment.approve", "deployment.cancel", "schedule.manage", "audit.read"}},
		{Subjects: []string{"group:viewers"}, Permissions: []string{"deployment.read"}},
	}
	// prod needs one approval by an SRE.
	uiGovernance = "approvals:\n  - {environments: [prod], applications: [\"*\"], count: 1, approvers: [\"group:sre\"], expires: 1h}\n"
)

type uiServer struct {
	URL     string
	Store   *store.Store
	Node    *node.Node
	HTTP    *httptest.Server
	DataDir string
	dir     string
	cfg     *node.Config
	wrap    func(http.Handler) http.Handler
}

// startUI runs a real server (SQLite file, engine, API and UI on loopback)
// with the identities above.
func startUI(t testing.TB, mutate ...func(*node.Config)) *uiServer {
	t.Helper()
	return startUIWrapped(t, nil, mutate...)
}

// startUIWrapped is startUI with wrap (when not nil) around the server's
// handler: a test's view of what the browser asks.
func startUIWrapped(t testing.TB, wrap func(http.Handler) http.Handler, mutate ...func(*node.Config)) *uiServer {
	t.Helper()
	dir := t.TempDir()
	gov := filepath.Join(dir, "governance.yaml")
	if err := os.WriteFile(gov, []byte(uiGovernance), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := servertest.Config(dir)
	cfg.ExecutorID = "webtest"
	cfg.Auth.Tokens, cfg.RBAC = uiTokens, uiRules
	cfg.Governance.Rules = gov
	for _, m := range mutate {
		m(cfg)
	}
	s := &uiServer{DataDir: cfg.DataDir, dir: dir, cfg: cfg, wrap: wrap}
	s.start(t, "127.0.0.1:0")
	s.URL = s.HTTP.URL
	t.Cleanup(func() { s.stop(t) })
	return s
}

// start opens the node and serves it on addr.
func (s *uiServer) start(t testing.TB, addr string) {
	t.Helper()
	ctx := context.Background()
	n, err := node.Open(ctx, s.cfg, node.Options{Plugins: builtin.Register, BootstrapToken: "admin-token"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Launch(ctx); err != nil {
		n.Close(5 * time.Second)
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		n.Close(5 * time.Second)
		t.Fatal(err)
	}
	var h http.Handler = n.API
	if s.wrap != nil {
		h = s.wrap(h)
	}
	hs := &httptest.Server{Listener: l, Config: &http.Server{Handler: h}}
	// As manent-server does: the shutdown ends the event streams first.
	hs.Config.RegisterOnShutdown(n.API.EndStreams)
	hs.Start()
	s.Node, s.Store, s.HTTP = n, n.Store, hs
}

// stop stops the HTTP server as manent-server does (its shutdown ends the
// event streams, which the browser then reconnects) and the node. It
// closed the connections, then the server: an EventSource that reconnected
// in between held the server's Close until its deploy ended — a deploy
// that went on, on the stopped server, past what the test restarted it
// for.
func (s *uiServer) stop(t testing.TB) {
	t.Helper()
	if s.HTTP == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.HTTP.Config.Shutdown(ctx); err != nil {
		t.Errorf("HTTP shutdown: %v: a request (an event stream?) did not end", err)
		s.HTTP.CloseClientConnections()
	}
	s.HTTP.Close()
	s.Node.Close(5 * time.Second)
	s.HTTP, s.Node = nil, nil
}

// restart stops the server and starts it again on the same address, data
// directory and database, as an operator restarting manent-server would.
func (s *uiServer) restart(t testing.TB) {
	t.Helper()
	addr := s.HTTP.Listener.Addr().String()
	s.stop(t)
	s.start(t, addr)
}

func (s *uiServer) client(token string) *api.Client { return api.NewClient(s.URL, token, nil) }

// gate returns a path whose creation lets a gated deploy go on.
func (s *uiServer) gate(t testing.TB, name string) string {
	return filepath.Join(s.dir, name)
}

func open(t testing.TB, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// gatedDeploy is a deploy whose first step prints a line, waits (bounded)
// for gate, then prints another.
func gatedDeploy(t testing.TB, env, version, gate string) []byte {
	art := filepath.Join(t.TempDir(), "app.txt")
	if err := os.WriteFile(art, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`echo "preparing %s"; i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; echo "gate opened for %s"`, version, gate, version)
	return []byte(fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: %s\nversion: %q\nartifact: {url: %q}\nsteps:\n  - {name: prepare, before: deploy, plugin: script, with: {command: [sh, -c, %q]}}\n",
		env, version, "file://"+art, script))
}

func (s *uiServer) submit(t testing.TB, token string, descriptor []byte) string {
	t.Helper()
	res, err := s.client(token).Submit(context.Background(), descriptor, false)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return res.ID
}

func (s *uiServer) waitState(t testing.TB, id string, want manent.State) {
	t.Helper()
	c := s.client("admin-token")
	enginetest.Eventually(t, 60*time.Second, func() bool {
		d, err := c.Deployment(context.Background(), id)
		return err == nil && d.State == want
	}, "deploy %s to be %s", id, want)
}

// browser is a cookie-keeping HTTP client that does not follow redirects.
type browser struct {
	t    testing.TB
	base string
	hc   *http.Client
}

func newBrowser(t testing.TB, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	Status int
	Header http.Header
	Body   string
}

func (b *browser) do(method, path string, form url.Values, hdr ...string) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return page{Status: resp.StatusCode, Header: resp.Header, Body: string(data)}
}

func (b *browser) get(path string) page { return b.do(http.MethodGet, path, nil) }

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of the first form of p.
func csrf(t testing.TB, p page) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatalf("no CSRF token in the page (status %d):\n%s", p.Status, p.Body)
	}
	return m[1]
}

// login signs b in with token and returns the page it lands on.
func (b *browser) login(token string) page {
	b.t.Helper()
	form := b.get("/login")
	p := b.do(http.MethodPost, "/login", url.Values{"csrf": {csrf(b.t, form)}, "token": {token}, "next": {"/"}})
	if p.Status != http.StatusSeeOther {
		b.t.Fatalf("sign in with %s: %d %s", token, p.Status, p.Body)
	}
	return p
}
