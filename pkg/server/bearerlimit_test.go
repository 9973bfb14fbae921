package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/plugins/builtin"
)

// lockedBuffer is a log sink the server writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// loggedServer is newTestServer's server with its log in a buffer.
func loggedServer(t *testing.T, opts ...func(*node.Config)) (string, *lockedBuffer) {
	t.Helper()
	cfg := servertest.Config(t.TempDir())
	cfg.Database, cfg.ExecutorID = enginetest.SQLite(t), "test"
	for _, o := range opts {
		o(cfg)
	}
	logs := &lockedBuffer{}
	ctx := context.Background()
	n, err := node.Open(ctx, cfg, node.Options{Plugins: builtin.Register, BootstrapToken: "admin-token",
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(n.API)
	t.Cleanup(func() {
		hs.Close()
		n.Close(5 * time.Second)
	})
	return hs.URL, logs
}

// clientFrom is an HTTP client whose connections leave from the loopback
// address ip (127.0.0.0/8 is all loopback): another client address.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// getWith GETs url with token from client c and returns the status, the
// problem and the headers.
func getWith(t *testing.T, c *http.Client, url, token string, headers ...string) (int, api.Problem, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p api.Problem
	_ = json.Unmarshal(b, &p)
	return resp.StatusCode, p, resp.Header
}

// Refused bearer tokens take from a budget of their client address
// (limits.bearer_failures_per_minute): past it, that address's requests
// with a credential are answered 429 with Retry-After without the token
// being checked — a right one too, or the answer would tell which guess
// hit — while the valid tokens of other addresses go on. A request with
// no credential takes nothing. The log says so once per stretch, with the
// address, never a token.
func TestBearerGuessingIsLimitedPerAddress(t *testing.T) {
	t.Parallel()
	url, logs := loggedServer(t, func(c *node.Config) { c.Limits.BearerFailuresPerMinute = 3 })
	route := url + "/api/v1/deployments"
	guesser, other := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")

	for i := range 5 {
		if code, p, _ := getWith(t, guesser, route, ""); code != http.StatusUnauthorized {
			t.Fatalf("no credential %d: %d %q, want 401 (no credential takes from the budget)", i, code, p.Detail)
		}
	}
	for i := range 3 {
		if code, p, _ := getWith(t, guesser, route, "guess-secret-"+string(rune('a'+i))); code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d %q, want 401", i, code, p.Detail)
		}
	}
	for _, token := range []string{"guess-secret-z", "admin-token"} {
		code, p, h := getWith(t, guesser, route, token)
		if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" || h.Get("Content-Type") != api.ProblemContentType ||
			!strings.Contains(p.Detail, "more than 3 refused credentials in a minute from 127.0.0.1 (limits.bearer_failures_per_minute)") {
			t.Fatalf("%s from the guessing address: %d Retry-After %q %q, want 429 problem+json with Retry-After", token, code, h.Get("Retry-After"), p.Detail)
		}
	}
	if code, p, _ := getWith(t, other, route, "admin-token"); code != http.StatusOK {
		t.Fatalf("a valid token from another address: %d %q, want 200", code, p.Detail)
	}
	if code, _, _ := getWith(t, other, route, "wrong-secret"); code != http.StatusUnauthorized {
		t.Fatalf("another address's first wrong token: %d, want 401", code)
	}
	out := logs.String()
	if n := strings.Count(out, "refused credentials of an address are limited"); n != 1 {
		t.Errorf("the limit was logged %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, `"address":"127.0.0.1"`) {
		t.Errorf("the log does not name the address:\n%s", out)
	}
	for _, secret := range []string{"guess-secret", "admin-token", "wrong-secret"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds a token (%s):\n%s", secret, out)
		}
	}
}
