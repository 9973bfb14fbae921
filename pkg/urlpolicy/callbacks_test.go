package urlpolicy

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/manent-io/manent/pkg/manent"
)

// fakeResolver answers from a table: each host has a list of answers, the
// n-th lookup getting the n-th answer (the last one repeats). No network.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]string
	lookups map[string]int
}

func newFakeResolver(answers map[string][][]string) *fakeResolver {
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
	if seq == nil {
		return nil, &net.DNSError{Err: "i/o timeout", Name: host, IsTimeout: true}
	}
	answer := seq[min(n, len(seq)-1)]
	var out []net.IPAddr
	for _, a := range answer {
		out = append(out, net.IPAddr{IP: net.ParseIP(a)})
	}
	return out, nil
}

func (r *fakeResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[host]
}

func one(addrs ...string) [][]string { return [][]string{addrs} }

func testResolver() *fakeResolver {
	return newFakeResolver(map[string][][]string{
		"ci.example":       one("93.184.216.34"),
		"v6.example":       one("2606:2800:220:1:248:1893:25c8:1946"),
		"evil.example":     one("127.0.0.1"),
		"dual.example":     one("93.184.216.34", "10.0.0.5"),
		"mapped.example":   one("::ffff:127.0.0.1"),
		"nat64.example":    one("64:ff9b::7f00:1"),
		"meta.example":     one("169.254.169.254"),
		"cgnat.example":    one("100.64.1.1"),
		"internal.ci":      one("10.1.2.3"),
		"meta.internal.ci": one("169.254.169.254"),
		"lab.example":      one("10.20.3.4"),
		"flaky.example":    nil, // a DNS timeout
	})
}

func TestCallbacksCheck(t *testing.T) {
	restricted := Callbacks{
		Allow: []string{
			"https://ci.example/**",
			"https://*.example/**",
			"http://127.0.0.1:*/**",
			"http://[::1]:8080/**",
			"https://internal.ci/**",
			"https://meta.internal.ci/**",
		},
		Resolver: testResolver(),
	}
	open := Callbacks{
		Allow:    []string{"https://**", "http://**", "10.20.0.0/16", "::ffff:192.168.7.0/120"},
		Resolver: testResolver(),
	}
	scoped := Callbacks{Allow: []string{"http://127.0.0.1:18522/**", "http://*:*/**"}, Resolver: testResolver()}
	tests := []struct {
		name   string
		policy Callbacks
		url    string
		want   string // "" to allow, else part of the EInvalid message
	}{
		{"public host", restricted, "https://ci.example/hooks/manent", ""},
		{"public IPv6 host", restricted, "https://v6.example/hooks", ""},
		{"host resolving to loopback", restricted, "https://evil.example/x", "resolves to 127.0.0.1 (loopback)"},
		{"one private address among public ones", restricted, "https://dual.example/x", "10.0.0.5 (private)"},
		{"IPv4-mapped loopback", restricted, "https://mapped.example/x", "127.0.0.1 (loopback)"},
		{"NAT64 of loopback", restricted, "https://nat64.example/x", "NAT64 of loopback"},
		{"host resolving to metadata", restricted, "https://meta.example/x", "169.254.169.254 (cloud metadata)"},
		{"host resolving to CGNAT", restricted, "https://cgnat.example/x", "carrier-grade NAT"},
		{"explicit loopback IP, any port", restricted, "http://127.0.0.1:9000/callback", ""},
		{"explicit loopback IP, default port", restricted, "http://127.0.0.1/callback", ""},
		{"explicit loopback IP, other scheme", restricted, "https://127.0.0.1/callback", "is not allowed by callbacks.allow"},
		{"other loopback IP", restricted, "http://127.0.0.2:9000/callback", "is not allowed by callbacks.allow"},
		{"explicit IPv6 loopback", restricted, "http://[::1]:8080/x", ""},
		{"explicit IPv6 loopback, other port", restricted, "http://[::1]:9090/x", "is not allowed by callbacks.allow"},
		{"explicit private host name", restricted, "https://internal.ci/hook", ""},
		{"explicit host name still not metadata", restricted, "https://meta.internal.ci/hook", "(cloud metadata)"},
		{"no matching pattern", restricted, "https://hooks.other.org/x", `is not allowed by callbacks.allow (allowed: https://ci.example/**, https://*.example/**`},
		{"scheme", restricted, "ftp://ci.example/x", "must be http or https"},
		{"credentials", restricted, "https://user:pw@ci.example/x", "must not contain credentials"},
		{"dot-dot", restricted, "https://ci.example/a/../b", `".."`},
		{"unresolvable", restricted, "https://nowhere.example/x", "does not resolve"},

		{"open: loopback", open, "http://127.0.0.1/x", "127.0.0.1 (loopback)"},
		{"open: IPv6 loopback", open, "http://[::1]:8080/x", "::1 (loopback)"},
		{"open: metadata", open, "http://169.254.169.254/latest/meta-data/", "(cloud metadata)"},
		{"open: AWS IPv6 metadata", open, "http://[fd00:ec2::254]/latest/", "(cloud metadata)"},
		{"open: Alibaba metadata", open, "http://100.100.100.200/latest/", "(cloud metadata)"},
		{"open: RFC 1918", open, "http://10.0.0.1/x", "10.0.0.1 (private)"},
		{"open: 172.16/12", open, "http://172.31.255.1/x", "(private)"},
		{"open: 192.168/16", open, "http://192.168.1.1/x", "(private)"},
		{"open: ULA", open, "http://[fd12::1]/x", "(private)"},
		{"open: link-local", open, "http://169.254.10.10/x", "(link-local)"},
		{"open: IPv6 link-local", open, "http://[fe80::1]/x", "(link-local)"},
		{"open: unspecified", open, "http://0.0.0.0:8080/x", "(unspecified)"},
		{"open: IPv6 unspecified", open, "http://[::]/x", "(unspecified)"},
		{"open: IPv4-mapped literal", open, "http://[::ffff:127.0.0.1]/x", "(loopback)"},
		{"open: broadcast", open, "http://255.255.255.255/x", "(reserved)"},
		{"open: metadata host name", open, "http://metadata.google.internal/computeMetadata/v1/", "cloud metadata host name"},
		{"open: metadata host name, trailing dot", open, "http://Metadata.Google.Internal./x", "cloud metadata host name"},
		{"open: host resolving to loopback", open, "https://evil.example/x", "resolves to 127.0.0.1 (loopback)"},
		{"open: public IP", open, "https://93.184.216.34/x", ""},
		{"open: CIDR entry", open, "https://10.20.1.1/x", ""},
		{"open: outside CIDR entry", open, "https://10.21.0.1/x", "(private)"},
		{"open: host in CIDR entry", open, "https://lab.example/x", ""},
		{"open: mapped CIDR entry", open, "https://192.168.7.9/x", ""},

		// A host named on one port is not opened on the others by a
		// wildcard pattern beside it.
		{"named port plus wildcard: the named port", scoped, "http://127.0.0.1:18522/hook", ""},
		{"named port plus wildcard: another port", scoped, "http://127.0.0.1:18525/hook", "127.0.0.1 (loopback)"},
		{"named port plus wildcard: a public host", scoped, "http://ci.example:8080/hook", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.policy.Check(context.Background(), tt.url)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check(%q) = %v, want nil", tt.url, err)
				}
				return
			}
			var e *manent.Error
			if !errors.As(err, &e) || e.Code != manent.EInvalid || !strings.Contains(e.Message, tt.want) {
				t.Fatalf("Check(%q) = %v, want EInvalid containing %q", tt.url, err, tt.want)
			}
			if strings.Contains(e.Message, "pw@") {
				t.Fatalf("message %q shows credentials", e.Message)
			}
		})
	}
}

func TestCallbacksMetadataNameIsNotResolved(t *testing.T) {
	r := testResolver()
	c := Callbacks{Allow: []string{"http://**"}, Resolver: r}
	if err := c.Check(context.Background(), "http://metadata.google.internal/"); err == nil {
		t.Fatal("metadata host allowed")
	}
	if n := r.count("metadata.google.internal"); n != 0 {
		t.Fatalf("resolved the metadata host %d times", n)
	}
}

func TestCallbacksDNSOutage(t *testing.T) {
	c := Callbacks{Allow: []string{"https://**"}, Resolver: testResolver()}
	err := c.Check(context.Background(), "https://flaky.example/x")
	if manent.ErrorCode(err) != manent.EUnavailable {
		t.Fatalf("got %v, want EUnavailable", err)
	}
	// CheckAll passes it through rather than blaming the descriptor.
	if err := c.CheckAll(context.Background(), []string{"https://ci.example/", "https://flaky.example/x"}); manent.ErrorCode(err) != manent.EUnavailable {
		t.Fatalf("CheckAll: got %v, want EUnavailable", err)
	}
}

func TestCallbacksZeroValue(t *testing.T) {
	err := Callbacks{Resolver: testResolver()}.Check(context.Background(), "https://ci.example/x")
	if err == nil || !strings.Contains(err.Error(), "callbacks.allow has no URL pattern") {
		t.Fatalf("got %v", err)
	}
}

func TestCallbacksCheckAll(t *testing.T) {
	c := Callbacks{Allow: []string{"https://ci.example/**", "https://*.example/**"}, Resolver: testResolver()}
	ctx := context.Background()
	if err := c.CheckAll(ctx, []string{"https://ci.example/a", "https://ci.example/b"}); err != nil {
		t.Fatalf("all allowed: %v", err)
	}
	if err := c.CheckAll(ctx, nil); err != nil {
		t.Fatalf("none: %v", err)
	}
	err := c.CheckAll(ctx, []string{"http://127.0.0.1/x", "https://ci.example/ok", "https://evil.example/x", "not a url"})
	var e *manent.Error
	if !errors.As(err, &e) || e.Code != manent.EInvalid {
		t.Fatalf("got %v, want EInvalid", err)
	}
	var paths []string
	for _, f := range e.Fields {
		paths = append(paths, f.Path)
	}
	if want := []string{"/callbacks/0/url", "/callbacks/2/url", "/callbacks/3/url"}; !slices.Equal(paths, want) {
		t.Fatalf("paths = %v, want %v (%v)", paths, want, e.Fields)
	}
	if !strings.Contains(e.Message, "3 callback URLs") {
		t.Fatalf("message %q", e.Message)
	}
	err = c.CheckAll(ctx, []string{"https://ci.example/ok", "https://evil.example/x"})
	if !errors.As(err, &e) || len(e.Fields) != 1 || e.Message != e.Fields[0].Message {
		t.Fatalf("one refusal: got %#v", err)
	}
}

func TestCallbacksValidate(t *testing.T) {
	err := Callbacks{Allow: []string{"https://ci.example/**", "ftp://x/**", "10.0.0.0/33", "not-an-ip", "fd00::/8"}}.Validate()
	var e *manent.Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v", err)
	}
	var paths []string
	for _, f := range e.Fields {
		paths = append(paths, f.Path)
	}
	if want := []string{"callbacks.allow[1]", "callbacks.allow[2]", "callbacks.allow[3]"}; !slices.Equal(paths, want) {
		t.Fatalf("paths = %v, want %v", paths, want)
	}
	if err := (Callbacks{Allow: []string{"https://ci.example/**", "127.0.0.1", "10.0.0.0/8"}}).Validate(); err != nil {
		t.Fatal(err)
	}
	// A bad policy is the server's fault, not the submitter's.
	if code := manent.ErrorCode(Callbacks{Allow: []string{"ftp://x/**"}}.Check(context.Background(), "https://ci.example/")); code == manent.EInvalid {
		t.Fatalf("a bad policy gave %s", code)
	}
}

// forbidden judges the address per host: what the dialer (and its Control
// hook) apply to the address actually connected to.
func TestForbiddenPerHost(t *testing.T) {
	p, err := Callbacks{Allow: []string{"http://**", "https://internal.ci/**"}, Resolver: testResolver()}.compile()
	if err != nil {
		t.Fatal(err)
	}
	if class := p.forbidden("internal.ci", mustAddr(t, "127.0.0.1")); class != "" {
		t.Fatalf("named host: forbidden = %q", class)
	}
	if class := p.forbidden("internal.ci", mustAddr(t, "0.0.0.0")); class != classUnspecified {
		t.Fatalf("named host, unspecified: forbidden = %q", class)
	}
	if class := p.forbidden("ci.example", mustAddr(t, "127.0.0.1")); class != classLoopback {
		t.Fatalf("forbidden = %q", class)
	}
	if class := p.forbidden("ci.example", mustAddr(t, "93.184.216.34")); class != "" {
		t.Fatalf("forbidden = %q", class)
	}
}
