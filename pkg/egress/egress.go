package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/urlpolicy"
)

// Policy is the policy of one use of outbound HTTP.
type Policy struct {
	// Rules say which URLs and addresses the use may reach.
	urlpolicy.Outbound
	// Timeout bounds a whole request, redirects and body included; 0 means
	// none (bound it with the request's context).
	Timeout time.Duration
	// MaxRedirects is how many redirects are followed, each hop checked
	// like the first request; 0 follows none and returns the 3xx.
	MaxRedirects int
}

// ErrRefused matches every refusal of a policy (errors.Is).
var ErrRefused = errors.New("refused by the outbound policy")

// RefusedError is a request the policy refused: a URL outside the
// allow-list (the first one or a redirect hop) or an address it may not
// reach. Err is an *manent.Error (URL) or an *urlpolicy.AddressError
// (address).
type RefusedError struct {
	Use string
	// From is the URL that redirected to the refused one ("" for the first
	// request or a dial).
	From string
	Err  error
}

func (e *RefusedError) Error() string {
	if e.From != "" {
		return fmt.Sprintf("redirect from %s refused: %v", strconv.Quote(urlpolicy.Redact(e.From)), e.Err)
	}
	return fmt.Sprintf("%s refused: %v", e.Use, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// IsRefused reports whether err is (or wraps) a refusal of a policy.
func IsRefused(err error) bool { return errors.Is(err, ErrRefused) }

// Validate reports mistakes in the allow-list: call it at startup.
func (p Policy) Validate() error { return p.Outbound.Validate() }

// New returns a client that enforces p (see the package doc). A policy that
// does not compile refuses every request with the reason; call Validate at
// startup to find out before.
func New(p Policy) *http.Client {
	pol, err := p.Outbound.Compile()
	t := &transport{policy: pol, badPolicy: describe(err), use: p.Outbound.Use}
	if t.use == "" {
		t.use = "outbound request"
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.Proxy = nil
	base.OnProxyConnectResponse = nil
	base.DialTLS = nil //nolint:staticcheck // deprecated, still honoured
	base.DialTLSContext = nil
	base.DialContext = t.dialContext
	t.base = base
	maxRedirects := p.MaxRedirects
	return &http.Client{
		Transport: t,
		Timeout:   p.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if maxRedirects <= 0 {
				return http.ErrUseLastResponse
			}
			if len(via) > maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			if err := t.check(req.Context(), req.URL); err != nil {
				return &RefusedError{Use: t.use, From: via[len(via)-1].URL.String(), Err: err}
			}
			return nil
		},
	}
}

// Deny returns a client that refuses every request: the client of a use
// nobody configured.
func Deny(use, key string) *http.Client {
	return New(Policy{Outbound: urlpolicy.Outbound{Use: use, Key: key}})
}

// transport checks each request's URL, then sends it through base, whose
// dialer checks addresses.
type transport struct {
	use       string
	policy    *urlpolicy.Policy
	badPolicy error
	base      *http.Transport
}

// check matches u against the allow-list, and refuses a non-public address
// of a named host that only a wildcard pattern matches (CheckScope).
// Credentials in u (an operator's basic-auth URL) are not part of what is
// matched: the host is.
func (t *transport) check(ctx context.Context, u *url.URL) error {
	if t.badPolicy != nil {
		return t.badPolicy
	}
	if u.User != nil {
		c := *u
		c.User = nil
		u = &c
	}
	if err := t.policy.Match(u.String()); err != nil {
		return err
	}
	return t.policy.CheckScope(ctx, u.String())
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.check(req.Context(), req.URL); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		if manent.ErrorCode(err) == manent.EUnavailable || req.Context().Err() != nil {
			return nil, err // a DNS failure or a cancel: not a refusal
		}
		return nil, &RefusedError{Use: t.use, Err: err}
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach base.
func (t *transport) CloseIdleConnections() { t.base.CloseIdleConnections() }

// dialTimeout and dialKeepAlive are http.DefaultTransport's.
const (
	dialTimeout   = 30 * time.Second
	dialKeepAlive = 30 * time.Second
)

// dialContext resolves the host with the policy's resolver, refuses the
// connection if any address is forbidden, dials the checked IPs itself,
// and checks the address again in Control, just before connecting.
func (t *transport) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if t.badPolicy != nil {
		return nil, t.badPolicy
	}
	rawHost, rawPort, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(rawPort, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("dial %s: bad port", addr)
	}
	host, addrs, err := t.policy.Resolve(ctx, rawHost)
	if err != nil {
		var ae *urlpolicy.AddressError
		if errors.As(err, &ae) {
			return nil, &RefusedError{Use: t.use, Err: ae}
		}
		return nil, err
	}
	for _, a := range addrs {
		if err := t.policy.Permit(host, a); err != nil {
			return nil, &RefusedError{Use: t.use, Err: err}
		}
	}
	d := &net.Dialer{
		Timeout:   dialTimeout,
		KeepAlive: dialKeepAlive,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("dial %s: %w", address, err)
			}
			if err := t.policy.Permit(host, ap.Addr()); err != nil {
				return &RefusedError{Use: t.use, Err: err}
			}
			return nil
		},
	}
	var firstErr error
	for _, a := range addrs {
		if (network == "tcp4" && !a.Is4()) || (network == "tcp6" && !a.Is6()) {
			continue
		}
		conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		if IsRefused(err) {
			return nil, err
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("dial %s: no %s address", addr, network)
	}
	return nil, firstErr
}

// Origin returns the URL pattern of every URL on rawURL's scheme, host and
// port ("https://itsm.example:443/**"): the allow-list of an endpoint the
// operator configured (ITSM, chat webhooks, the configuration service, the
// OIDC issuer). Since it names the host literally, that host may be
// private or loopback. "" when rawURL has no http(s) scheme or host.
func Origin(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return ""
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is6() {
		host = "[" + host + "]"
	}
	if u.Port() != "" {
		host += ":" + u.Port()
	}
	return u.Scheme + "://" + host + "/**"
}

// Origins returns the Origin patterns of rawURLs, skipping the URLs that
// have none: the allow-list of the endpoints the operator configured.
func Origins(rawURLs ...string) []string {
	var out []string
	for _, u := range rawURLs {
		if o := Origin(u); o != "" {
			out = append(out, o)
		}
	}
	return out
}

// describe spells out the field errors of a policy that does not compile.
func describe(err error) error {
	var e *manent.Error
	if !errors.As(err, &e) || len(e.Fields) == 0 {
		return err
	}
	var parts []string
	for _, f := range e.Fields {
		parts = append(parts, f.Path+": "+f.Message)
	}
	return fmt.Errorf("%s: %s", e.Message, strings.Join(parts, "; "))
}
