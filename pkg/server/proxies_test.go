package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/node"
)

// Behind a reverse proxy named in trusted_proxies, the per-address limits
// count by the client X-Forwarded-For names: the right-most address the
// proxies did not add (what the client wrote left of it is ignored). A
// peer that is not a trusted proxy counts as itself whatever it writes.
// Without trusted_proxies every client behind the proxy was one address:
// one sending wrong tokens shut the API to all of them.
func TestTrustedProxiesNameTheClient(t *testing.T) {
	t.Parallel()
	url, logs := loggedServer(t, func(c *node.Config) {
		c.Limits.BearerFailuresPerMinute = 2
		c.TrustedProxies = []string{"127.0.0.1/32", "127.0.0.3"}
	})
	route := url + "/api/v1/deployments"
	proxy, stranger := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")
	xff := "X-Forwarded-For"

	// A guesser behind the proxy spends its own budget, writing what it
	// likes left of the address the proxy appends.
	for i, chain := range []string{"203.0.113.9", "198.51.100.1, 203.0.113.9", "10.9.9.9,203.0.113.9, 127.0.0.3"} {
		if code, p, _ := getWith(t, proxy, route, "guess-"+string(rune('a'+i)), xff, chain); code != http.StatusUnauthorized && i < 2 {
			t.Fatalf("guess %d: %d %q, want 401", i, code, p.Detail)
		}
	}
	if code, p, _ := getWith(t, proxy, route, "admin-token", xff, "203.0.113.9"); code != http.StatusTooManyRequests ||
		!strings.Contains(p.Detail, "from 203.0.113.9 (limits.bearer_failures_per_minute)") {
		t.Fatalf("the guesser's valid token: %d %q, want the 429 of 203.0.113.9", code, p.Detail)
	}
	// Another client behind the same proxy is not touched.
	if code, p, _ := getWith(t, proxy, route, "admin-token", xff, "203.0.113.10"); code != http.StatusOK {
		t.Fatalf("another client behind the proxy: %d %q, want 200", code, p.Detail)
	}
	// The proxy itself (no X-Forwarded-For) is its own address.
	if code, p, _ := getWith(t, proxy, route, "admin-token"); code != http.StatusOK {
		t.Fatalf("the proxy's own request: %d %q, want 200", code, p.Detail)
	}
	// A peer that is no trusted proxy cannot name another client: its
	// guesses are its own, whatever X-Forwarded-For it writes.
	for i := range 2 {
		getWith(t, stranger, route, "guess-x"+string(rune('a'+i)), xff, "203.0.113.20")
	}
	if code, p, _ := getWith(t, stranger, route, "admin-token", xff, "203.0.113.21"); code != http.StatusTooManyRequests ||
		!strings.Contains(p.Detail, "from 127.0.0.2 ") {
		t.Fatalf("an untrusted peer's request: %d %q, want the 429 of 127.0.0.2", code, p.Detail)
	}
	if code, p, _ := getWith(t, proxy, route, "admin-token", xff, "203.0.113.20"); code != http.StatusOK {
		t.Fatalf("the client an untrusted peer named: %d %q, want 200", code, p.Detail)
	}
	if strings.Contains(logs.String(), "X-Forwarded-For is not trusted") {
		t.Errorf("the log warns of an untrusted X-Forwarded-For while trusted_proxies is set:\n%s", logs.String())
	}
}

// Without trusted_proxies X-Forwarded-For is read for nothing, and the log
// says once that requests come through a proxy it does not trust.
func TestUntrustedForwardedForIsIgnored(t *testing.T) {
	t.Parallel()
	url, logs := loggedServer(t, func(c *node.Config) { c.Limits.BearerFailuresPerMinute = 2 })
	route := url + "/api/v1/deployments"
	proxy := clientFrom("127.0.0.1")
	for i := range 3 {
		getWith(t, proxy, route, "guess-"+string(rune('a'+i)), "X-Forwarded-For", "203.0.113."+string(rune('1'+i)))
	}
	if code, p, _ := getWith(t, proxy, route, "admin-token", "X-Forwarded-For", "203.0.113.50"); code != http.StatusTooManyRequests ||
		!strings.Contains(p.Detail, "from 127.0.0.1 ") {
		t.Fatalf("%d %q, want the 429 of 127.0.0.1", code, p.Detail)
	}
	if n := strings.Count(logs.String(), "X-Forwarded-For is not trusted"); n != 1 {
		t.Errorf("the untrusted X-Forwarded-For was logged %d times, want once:\n%s", n, logs.String())
	}
}
