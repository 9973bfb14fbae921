package urlpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// Resolver resolves host names; *net.Resolver is one.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Callbacks is the `callbacks.allow` policy. The zero Callbacks allows no
// callback.
//
// Each Allow entry is either a URL pattern of scheme http or https, such as
// "https://ci.example/**" or "http://127.0.0.1:*/**", or a bare IP address
// or CIDR prefix, such as "10.20.0.0/16". A callback URL must match a URL
// pattern. Then every address its host resolves to must be public, unless
//   - it lies in an IP/CIDR entry, or
//   - a URL pattern names the URL's host literally (no wildcard): the exact
//     IP of an IP URL, or a host name, whose addresses may then be private,
//     loopback or link-local, though not a cloud metadata or unspecified
//     address (those need an IP/CIDR entry or an IP pattern).
//
// Cloud metadata host names (metadata.google.internal, …) are refused
// unless a URL pattern names them literally.
type Callbacks struct {
	Allow []string `mapstructure:"allow" yaml:"allow"`
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver `mapstructure:"-" yaml:"-"`
}

// policy is a compiled Callbacks.
type policy struct {
	patterns []pattern
	nets     []netip.Prefix
	hosts    map[string]bool // named literally by a URL pattern
	resolver Resolver
}

func callbackSchemes() []string { return []string{"http", "https"} }

// Validate reports mistakes in Allow as an *manent.Error with code EInvalid
// and a field error per entry ("callbacks.allow[2]").
func (c Callbacks) Validate() error {
	_, err := c.compile()
	return err
}

func (c Callbacks) compile() (*policy, error) {
	p := &policy{hosts: map[string]bool{}, resolver: c.Resolver}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	var errs []manent.FieldError
	for i, raw := range c.Allow {
		if !strings.Contains(raw, "://") {
			prefix, err := parsePrefix(raw)
			if err != nil {
				errs = append(errs, manent.FieldError{Path: fmt.Sprintf("callbacks.allow[%d]", i), Message: fmt.Sprintf("%q is neither a URL pattern (https://host/**) nor an IP address or CIDR prefix", raw)})
				continue
			}
			p.nets = append(p.nets, prefix)
			continue
		}
		pat, err := compilePattern(raw, callbackSchemes())
		if err != nil {
			errs = append(errs, manent.FieldError{Path: fmt.Sprintf("callbacks.allow[%d]", i), Message: fmt.Sprintf("%q: %v", raw, err)})
			continue
		}
		p.patterns = append(p.patterns, pat)
		if pat.host != "" {
			p.hosts[pat.host] = true
		}
	}
	if len(errs) > 0 {
		return nil, &manent.Error{Code: manent.EInvalid, Message: "invalid callbacks.allow", Fields: errs}
	}
	return p, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 { // ::ffff:10.0.0.0/104 is 10.0.0.0/8
			return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked(), nil
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Check returns nil if the policy allows a callback to rawURL: its scheme
// is http or https, it matches a URL pattern, and every address its host
// resolves to is allowed. A refusal is an *manent.Error with code EInvalid;
// a DNS failure other than "no such host" is EUnavailable.
func (c Callbacks) Check(ctx context.Context, rawURL string) error {
	p, err := c.compile()
	if err != nil {
		return badPolicy(err)
	}
	return p.check(ctx, rawURL)
}

// CheckAll checks every URL and returns all refusals at once: one
// *manent.Error with code EInvalid and a field error per refused URL at
// "/callbacks/<i>/url" (the descriptor paths of SPEC §2), for one 422.
// Any other error (a bad policy, a DNS outage) is returned as it is.
func (c Callbacks) CheckAll(ctx context.Context, rawURLs []string) error {
	p, err := c.compile()
	if err != nil {
		return badPolicy(err)
	}
	var fields []manent.FieldError
	for i, raw := range rawURLs {
		err := p.check(ctx, raw)
		if err == nil {
			continue
		}
		var e *manent.Error
		if !errors.As(err, &e) || e.Code != manent.EInvalid {
			return err
		}
		fields = append(fields, manent.FieldError{Path: fmt.Sprintf("/callbacks/%d/url", i), Message: e.Message})
	}
	if len(fields) == 0 {
		return nil
	}
	msg := fmt.Sprintf("%d callback URLs are not allowed by the callback policy", len(fields))
	if len(fields) == 1 {
		msg = fields[0].Message
	}
	return &manent.Error{Code: manent.EInvalid, Message: msg, Fields: fields}
}

func (p *policy) check(ctx context.Context, raw string) error {
	t, err := parseTarget(raw)
	if err != nil {
		return invalid("callback URL %s %v", t.display, err)
	}
	if t.scheme != "http" && t.scheme != "https" {
		return invalid("callback URL %s: the scheme must be http or https", t.display)
	}
	if !p.matches(t.canon) {
		if len(p.patterns) == 0 {
			return invalid("callback URL %s is not allowed: callbacks.allow has no URL pattern", t.display)
		}
		return invalid("callback URL %s is not allowed by callbacks.allow (allowed: %s)", t.display, strings.Join(p.patternList(), ", "))
	}
	addrs, err := p.addresses(ctx, t.host, t.ip)
	if err != nil {
		var ae *AddressError
		if errors.As(err, &ae) {
			return invalid("callback URL %s: %v", t.display, err)
		}
		return err
	}
	var refused []string
	for _, a := range addrs {
		if class := p.forbidden(t.host, a); class != "" {
			refused = append(refused, fmt.Sprintf("%s (%s)", a, class))
		}
	}
	if len(refused) == 0 {
		return nil
	}
	if t.ip.IsValid() {
		return invalid("callback URL %s: %s is not a public address, and callbacks.allow does not name it", t.display, refused[0])
	}
	return invalid("callback URL %s: host %s resolves to %s, and callbacks.allow does not name the host or address", t.display, t.host, strings.Join(refused, ", "))
}

func (p *policy) matches(canon string) bool {
	for _, pat := range p.patterns {
		if pat.match(canon) {
			return true
		}
	}
	return false
}

func (p *policy) patternList() []string {
	var out []string
	for _, pat := range p.patterns {
		out = append(out, pat.raw)
	}
	return out
}

// addresses returns the addresses of host: ip itself when valid, else the
// resolver's answer. Errors are *AddressError for a refused metadata host
// name, *manent.Error otherwise.
func (p *policy) addresses(ctx context.Context, host string, ip netip.Addr) ([]netip.Addr, error) {
	if ip.IsValid() {
		return []netip.Addr{ip}, nil
	}
	if isMetadataHost(host) && !p.hosts[host] {
		return nil, &AddressError{Host: host, Class: classMetadata}
	}
	res, err := p.resolver.LookupIPAddr(ctx, host)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return nil, invalid("callback host %s does not resolve (no such host)", host)
		}
		return nil, manent.Errorf(manent.EUnavailable, "cannot resolve callback host %s now; retry later", host)
	}
	var addrs []netip.Addr
	for _, r := range res {
		if a, ok := netip.AddrFromSlice(r.IP); ok {
			addrs = append(addrs, a.Unmap().WithZone(r.Zone))
		}
	}
	if len(addrs) == 0 {
		return nil, invalid("callback host %s has no address", host)
	}
	return addrs, nil
}

// forbidden returns the class of a if a callback to host may not reach it,
// or "" if it may.
func (p *policy) forbidden(host string, a netip.Addr) string {
	class := classify(a)
	if class == "" {
		return ""
	}
	a = a.Unmap().WithZone("")
	for _, n := range p.nets {
		if n.Contains(a) {
			return ""
		}
	}
	if p.hosts[host] {
		if ip, err := netip.ParseAddr(host); err == nil && ip == a {
			return "" // an IP URL named by a pattern
		}
		if class != classMetadata && class != classUnspecified {
			return "" // a host name named by a pattern
		}
	}
	return class
}

// AddressError is a callback refused because of the address it would
// reach. SafeTransport's dial fails with it; callers can tell it from a
// network failure with errors.As and not retry.
type AddressError struct {
	Host  string
	Addr  netip.Addr // invalid when the host name itself is refused
	Class string     // "loopback", "private", "cloud metadata", …
}

func (e *AddressError) Error() string {
	if !e.Addr.IsValid() {
		return fmt.Sprintf("host %s is a %s host name, which callbacks.allow does not name", e.Host, e.Class)
	}
	if e.Host == e.Addr.WithZone("").String() {
		return fmt.Sprintf("%s is a %s address, which callbacks.allow does not name", e.Addr, e.Class)
	}
	return fmt.Sprintf("host %s resolves to %s, a %s address, which callbacks.allow does not name", e.Host, e.Addr, e.Class)
}

// SafeTransport returns a copy of base (nil: of http.DefaultTransport) that
// only connects where the policy allows: its dialer resolves the host with
// the policy's resolver, refuses the connection if any address is
// forbidden, dials the checked IP itself, and checks the address again
// just before connecting (net.Dialer.Control). So a host that resolved to
// a public address when the callback was checked and to 127.0.0.1 when it
// is sent (DNS rebinding) is refused with an *AddressError.
//
// Proxies are turned off (a proxy would resolve the host itself), as are
// base's custom dial functions. Check the URL with Check before sending:
// the transport checks addresses, not URL patterns.
func (c Callbacks) SafeTransport(base *http.Transport) *http.Transport {
	if base == nil {
		base = http.DefaultTransport.(*http.Transport)
	}
	t := base.Clone()
	t.Proxy = nil
	t.OnProxyConnectResponse = nil
	// DialContext takes precedence over Dial, but a TLS dial function
	// would bypass it.
	t.DialTLS = nil //nolint:staticcheck // deprecated, still honoured
	t.DialTLSContext = nil
	p, err := c.compile()
	if err != nil {
		t.DialContext = func(context.Context, string, string) (net.Conn, error) {
			return nil, badPolicy(err)
		}
		return t
	}
	t.DialContext = p.dialContext
	return t
}

// Client returns an HTTP client for sending callbacks: SafeTransport, the
// given timeout, and redirects not followed (a 3xx is returned as the
// response), so a receiver cannot redirect a callback elsewhere.
func (c Callbacks) Client(timeout time.Duration) *http.Client {
	return &http.Client{
		Transport: c.SafeTransport(nil),
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// dialTimeout and dialKeepAlive are http.DefaultTransport's.
const (
	dialTimeout   = 30 * time.Second
	dialKeepAlive = 30 * time.Second
)

func (p *policy) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	rawHost, rawPort, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(rawPort, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("dial %s: bad port", addr)
	}
	host, ip, err := canonicalHost(rawHost)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	addrs, err := p.addresses(ctx, host, ip)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if class := p.forbidden(host, a); class != "" {
			return nil, &AddressError{Host: host, Addr: a, Class: class}
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
			if class := p.forbidden(host, ap.Addr()); class != "" {
				return &AddressError{Host: host, Addr: ap.Addr(), Class: class}
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
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("dial %s: no %s address", addr, network)
	}
	return nil, firstErr
}

// badPolicy reports a mistake in callbacks.allow found while checking a
// URL: the server's configuration is wrong, not the submitted URL, so it is
// not an EInvalid (use Validate at startup).
func badPolicy(err error) error {
	var e *manent.Error
	if !errors.As(err, &e) || len(e.Fields) == 0 {
		return fmt.Errorf("callbacks.allow: %v", err)
	}
	var parts []string
	for _, f := range e.Fields {
		parts = append(parts, f.Path+": "+f.Message)
	}
	return errors.New(strings.Join(parts, "; "))
}

func invalid(format string, args ...any) error {
	return manent.Errorf(manent.EInvalid, format, args...)
}
