package egress_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/egress"
	"github.com/manent-io/manent/pkg/urlpolicy"
)

// fakeResolver answers from a table, the n-th lookup of a host getting its
// n-th answer (the last one repeats). No network.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]string
	lookups map[string]int
}

func resolver(answers map[string][]string) *fakeResolver {
	return &fakeResolver{answers: answers, lookups: map[string]int{}}
}

func (r *fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.lookups[host]
	r.lookups[host]++
	seq, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []net.IPAddr{{IP: net.ParseIP(seq[min(n, len(seq)-1)])}}, nil
}

func (r *fakeResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[host]
}

// server is a real HTTP server on 127.0.0.1 that counts its requests.
type server struct {
	*httptest.Server
	hits atomic.Int32
	port string
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	s.port = u.Port()
	return s
}

func redirectTo(target string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, target, http.StatusFound) }
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err == nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}

func mustRefuse(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatal("request sent, want a refusal")
	}
	if !egress.IsRefused(err) {
		t.Fatalf("got %v, want a refusal", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}

// An allowed source that redirects to a second server the allow-list does
// not name: the hop is refused, the second server never hears of it.
func TestRedirectToAnotherServerIsRefused(t *testing.T) {
	b := newServer(t, nil)
	a := newServer(t, redirectTo(b.URL+"/app.tar.gz"))
	c := egress.New(egress.Policy{
		Outbound:     urlpolicy.Outbound{Use: "artifact", Key: "artifacts.sources", Allow: []string{a.URL + "/**"}},
		MaxRedirects: 5,
	})
	_, err := get(t, c, a.URL+"/app.tar.gz")
	mustRefuse(t, err, `redirect from "`+a.URL+`/app.tar.gz" refused: artifact URL "`+b.URL+`/app.tar.gz" is not allowed by artifacts.sources`)
	if a.hits.Load() != 1 || b.hits.Load() != 0 {
		t.Fatalf("hits: a %d, b %d; want 1, 0", a.hits.Load(), b.hits.Load())
	}
}

// A redirect within the allow-list is followed.
func TestRedirectWithinPolicyIsFollowed(t *testing.T) {
	b := newServer(t, nil)
	a := newServer(t, redirectTo(b.URL+"/x"))
	c := egress.New(egress.Policy{
		Outbound:     urlpolicy.Outbound{Use: "artifact", Key: "artifacts.sources", Allow: []string{a.URL + "/**", b.URL + "/**"}},
		MaxRedirects: 5,
	})
	resp, err := get(t, c, a.URL+"/x")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || b.hits.Load() != 1 {
		t.Fatalf("status %s, b hits %d", resp.Status, b.hits.Load())
	}
}

// Redirects to the metadata service or a private address are refused
// before any connection, even when every URL matches (local trial mode:
// private addresses allowed, metadata never).
func TestRedirectToMetadataOrPrivateIsRefusedBeforeConnecting(t *testing.T) {
	tests := []struct {
		name    string
		private bool
		target  string
		want    string
	}{
		{"metadata, trial", true, "http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud metadata address, which artifacts.sources does not name"},
		{"metadata, configured", false, "http://169.254.169.254/latest/meta-data/", "cloud metadata address"},
		{"metadata host name", true, "http://metadata.google.internal/computeMetadata/v1/", "cloud metadata host name"},
		{"private", false, "http://10.255.255.1:8080/x", "10.255.255.1 is a private address"},
		{"link-local", false, "http://169.254.10.10/x", "link-local address"},
		{"loopback", false, "http://127.0.0.2:1/x", "loopback address"},
		{"host resolving to loopback", false, "http://rebound.example:1/x", "host rebound.example resolves to 127.0.0.1, a loopback address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newServer(t, redirectTo(tt.target))
			r := resolver(map[string][]string{"rebound.example": {"127.0.0.1"}})
			// a is named literally (loopback allowed for it); the targets
			// match only the wildcard pattern.
			c := egress.New(egress.Policy{
				Outbound: urlpolicy.Outbound{Use: "artifact", Key: "artifacts.sources",
					Allow: []string{"http://127.0.0.1:" + a.port + "/**", "http://*:*/**", "http://*/**"}, Private: tt.private, Resolver: r},
				MaxRedirects: 5,
			})
			_, err := get(t, c, a.URL+"/x")
			mustRefuse(t, err, tt.want)
			var ae *urlpolicy.AddressError
			if !errors.As(err, &ae) {
				t.Fatalf("got %v, want an *urlpolicy.AddressError in the chain", err)
			}
		})
	}
}

// DNS rebinding: the host resolves to a public address when checked and
// to loopback when dialed. The dialer refuses.
func TestRebindingRefusedAtDial(t *testing.T) {
	s := newServer(t, nil)
	r := resolver(map[string][]string{"hooks.example": {"93.184.216.34", "127.0.0.1"}})
	pol := urlpolicy.Outbound{Use: "callback", Key: "callbacks.allow", Allow: []string{"http://*.example:*/**"}, Resolver: r}
	target := "http://hooks.example:" + s.port + "/manent"
	compiled, err := pol.Compile()
	if err != nil {
		t.Fatal(err)
	}
	if err := compiled.Check(context.Background(), target); err != nil {
		t.Fatalf("Check at submission: %v", err)
	}
	_, err = get(t, egress.New(egress.Policy{Outbound: pol}), target)
	mustRefuse(t, err, "host hooks.example resolves to 127.0.0.1, a loopback address, which callbacks.allow does not name")
	if s.hits.Load() != 0 {
		t.Fatalf("the loopback server got %d requests", s.hits.Load())
	}
	if n := r.count("hooks.example"); n != 2 {
		t.Fatalf("%d lookups, want 2 (check, dial)", n)
	}
}

// An allow-list entry naming a loopback host allows that address for
// this use; a wildcard does not.
func TestExplicitLoopback(t *testing.T) {
	s := newServer(t, nil)
	r := resolver(map[string][]string{"hooks.internal": {"127.0.0.1"}})
	tests := []struct {
		name  string
		allow []string
		url   string
		ok    bool
	}{
		{"IP pattern", []string{"http://127.0.0.1:*/**"}, s.URL + "/x", true},
		{"host name pattern", []string{"http://hooks.internal:" + s.port + "/**"}, "http://hooks.internal:" + s.port + "/x", true},
		{"CIDR entry", []string{"http://**", "127.0.0.0/8"}, s.URL + "/x", true},
		{"wildcard only", []string{"http://**"}, s.URL + "/x", false},
		{"wildcard host name", []string{"http://*.internal:*/**"}, "http://hooks.internal:" + s.port + "/x", false},
		{"not in the list", []string{"https://ci.example/**"}, s.URL + "/x", false},
		// Naming a host opens it to that pattern's URLs only, not to every
		// port and path a wildcard pattern beside it matches.
		{"named on another port, wildcard beside", []string{"http://127.0.0.1:1/**", "http://*:*/**"}, s.URL + "/x", false},
		{"named on another path, wildcard beside", []string{"http://127.0.0.1:" + s.port + "/api/**", "http://*:*/**"}, s.URL + "/admin", false},
		{"named path, wildcard beside", []string{"http://127.0.0.1:" + s.port + "/api/**", "http://*:*/**"}, s.URL + "/api/x", true},
		{"host name on another port, wildcard beside", []string{"http://hooks.internal:1/**", "http://*:*/**"}, "http://hooks.internal:" + s.port + "/x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.hits.Load()
			resp, err := get(t, egress.New(egress.Policy{Outbound: urlpolicy.Outbound{Use: "callback", Key: "callbacks.allow", Allow: tt.allow, Resolver: r}}), tt.url)
			if !tt.ok {
				mustRefuse(t, err, "callbacks.allow")
				if s.hits.Load() != before {
					t.Fatal("the server got a request")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || s.hits.Load() != before+1 {
				t.Fatalf("status %s, %d new requests", resp.Status, s.hits.Load()-before)
			}
		})
	}
}

// Without MaxRedirects the 3xx is the answer: a callback receiver cannot
// send the callback elsewhere.
func TestNoRedirectsByDefault(t *testing.T) {
	s := newServer(t, redirectTo("http://169.254.169.254/latest/meta-data/"))
	c := egress.New(egress.Policy{Outbound: urlpolicy.Outbound{Allow: []string{"http://127.0.0.1:*/**"}}})
	resp, err := get(t, c, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("status %s, want the 302 itself", resp.Status)
	}
}

func TestTooManyRedirects(t *testing.T) {
	var s *server
	s = newServer(t, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, s.URL+"/again", http.StatusFound) })
	c := egress.New(egress.Policy{Outbound: urlpolicy.Outbound{Allow: []string{s.URL + "/**"}}, MaxRedirects: 3})
	_, err := get(t, c, s.URL)
	if err == nil || !strings.Contains(err.Error(), "stopped after 3 redirects") {
		t.Fatalf("got %v", err)
	}
	if s.hits.Load() != 4 {
		t.Fatalf("%d requests, want 4", s.hits.Load())
	}
}

// A proxy from the environment is never used.
func TestNoProxy(t *testing.T) {
	proxy := newServer(t, nil)
	s := newServer(t, nil)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	if _, err := get(t, egress.New(egress.Policy{Outbound: urlpolicy.Outbound{Allow: []string{s.URL + "/**"}}}), s.URL); err != nil {
		t.Fatal(err)
	}
	if proxy.hits.Load() != 0 || s.hits.Load() != 1 {
		t.Fatalf("proxy %d, server %d", proxy.hits.Load(), s.hits.Load())
	}
}

func TestBadPolicyAndDeny(t *testing.T) {
	s := newServer(t, nil)
	_, err := get(t, egress.New(egress.Policy{Outbound: urlpolicy.Outbound{Key: "health.allow", Allow: []string{"ftp://x/**"}}}), s.URL)
	if err == nil || !strings.Contains(err.Error(), "health.allow[0]") {
		t.Fatalf("got %v", err)
	}
	_, err = get(t, egress.Deny("health check", "health.allow"), s.URL)
	mustRefuse(t, err, "health.allow has no URL pattern")
	if s.hits.Load() != 0 {
		t.Fatal("the server got a request")
	}
}

func TestOrigin(t *testing.T) {
	for raw, want := range map[string]string{
		"https://itsm.example/api":            "https://itsm.example/**",
		"http://127.0.0.1:9000/changes?x=1":   "http://127.0.0.1:9000/**",
		"https://[::1]:8443/x":                "https://[::1]:8443/**",
		"https://cfg.example/{environment}/a": "https://cfg.example/**",
		"ftp://x/y":                           "",
		"not a url":                           "",
	} {
		if got := egress.Origin(raw); got != want {
			t.Errorf("Origin(%q) = %q, want %q", raw, got, want)
		}
		if want == "" {
			continue
		}
		if err := (urlpolicy.Outbound{Key: "k", Allow: []string{want}}).Validate(); err != nil {
			t.Errorf("Origin(%q) = %q does not compile: %v", raw, want, err)
		}
	}
}

// A connection kept from an allowed request to a named host does not carry
// a later request that only a wildcard pattern allows: the scope is checked
// per request, before the pool is asked.
func TestNamedScopeHoldsOnAPooledConnection(t *testing.T) {
	s := newServer(t, nil)
	c := egress.New(egress.Policy{Outbound: urlpolicy.Outbound{Use: "health check", Key: "health.allow",
		Allow: []string{"http://127.0.0.1:" + s.port + "/api/**", "http://*:*/**"}}})
	resp, err := get(t, c, s.URL+"/api/ok")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	before := s.hits.Load()
	_, err = get(t, c, s.URL+"/admin")
	mustRefuse(t, err, "do not match this URL")
	if s.hits.Load() != before {
		t.Fatal("the server got the request")
	}
}
