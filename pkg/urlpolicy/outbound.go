package urlpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/manent-io/manent/pkg/manent"
)

// Outbound is the allow-list of one use of outbound HTTP (artifact
// downloads, health checks, callbacks, chat, the http plugin, ITSM): the
// rules pkg/egress enforces on every request, every redirect hop and every
// connection of that use.
//
// Allow has the syntax of `callbacks.allow` (see Callbacks): URL patterns,
// and bare IP addresses or CIDR prefixes. A URL must match a pattern; then
// every address its host resolves to must be public, unless it lies in an
// IP/CIDR entry, or a pattern that names the host literally matches the
// URL (not a cloud metadata or unspecified address, unless the pattern is
// that IP), or Private is set.
type Outbound struct {
	// Use names the requests in messages: "artifact", "health check", …
	Use string
	// Key is the configuration key of Allow, for messages:
	// "artifacts.sources", "health.allow", …
	Key string
	// Allow lists URL patterns and IP/CIDR entries.
	Allow []string
	// Schemes are the schemes Allow's patterns may have; nil means http
	// and https. (artifacts.sources also has file patterns, which never
	// match an HTTP request.)
	Schemes []string
	// Private lets every allowed URL reach private, loopback, link-local
	// and other non-public addresses, though never a cloud metadata or
	// unspecified address unless an IP/CIDR entry or an IP pattern names
	// it: local trial mode.
	Private bool
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver
}

// Policy is a compiled Outbound. It is safe for concurrent use.
type Policy struct {
	use, key string
	private  bool
	patterns []pattern
	nets     []netip.Prefix
	hosts    map[string]bool // named literally by a URL pattern
	resolver Resolver
}

// Compile checks and compiles o. A mistake is an *manent.Error with code
// EInvalid and a field error per entry ("<Key>[2]").
func (o Outbound) Compile() (*Policy, error) {
	p := &Policy{use: o.Use, key: o.Key, private: o.Private, hosts: map[string]bool{}, resolver: o.Resolver}
	if p.use == "" {
		p.use = "outbound"
	}
	if p.key == "" {
		p.key = "the allow-list"
	}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	schemes := o.Schemes
	if schemes == nil {
		schemes = callbackSchemes()
	}
	var errs []manent.FieldError
	for i, raw := range o.Allow {
		if !strings.Contains(raw, "://") {
			prefix, err := parsePrefix(raw)
			if err != nil {
				errs = append(errs, manent.FieldError{Path: fmt.Sprintf("%s[%d]", o.Key, i), Message: fmt.Sprintf("%q is neither a URL pattern (https://host/**) nor an IP address or CIDR prefix", raw)})
				continue
			}
			p.nets = append(p.nets, prefix)
			continue
		}
		pat, err := compilePattern(raw, schemes)
		if err != nil {
			errs = append(errs, manent.FieldError{Path: fmt.Sprintf("%s[%d]", o.Key, i), Message: fmt.Sprintf("%q: %v", raw, err)})
			continue
		}
		p.patterns = append(p.patterns, pat)
		if pat.host != "" {
			p.hosts[pat.host] = true
		}
	}
	if len(errs) > 0 {
		return nil, &manent.Error{Code: manent.EInvalid, Message: "invalid " + o.Key, Fields: errs}
	}
	return p, nil
}

// Validate reports mistakes in Allow (see Compile).
func (o Outbound) Validate() error {
	_, err := o.Compile()
	return err
}

// Use and Key are the names given in the Outbound.
func (p *Policy) Use() string { return p.use }
func (p *Policy) Key() string { return p.key }

// Match returns nil if rawURL is an http or https URL that matches a URL
// pattern; it does not resolve the host. A refusal is an *manent.Error with
// code EInvalid.
func (p *Policy) Match(rawURL string) error {
	t, err := parseTarget(rawURL)
	if err != nil {
		return invalid("%s URL %s %v", p.use, t.display, err)
	}
	if t.scheme != "http" && t.scheme != "https" {
		return invalid("%s URL %s: the scheme must be http or https", p.use, t.display)
	}
	if p.matches(t.canon) {
		return nil
	}
	if len(p.patterns) == 0 {
		return invalid("%s URL %s is not allowed: %s has no URL pattern", p.use, t.display, p.key)
	}
	return invalid("%s URL %s is not allowed by %s (allowed: %s)", p.use, t.display, p.key, strings.Join(p.patternList(), ", "))
}

// Check returns nil if rawURL matches a pattern (Match) and every address
// its host resolves to is allowed. A refusal is an *manent.Error with code
// EInvalid; a DNS failure other than "no such host" is EUnavailable.
func (p *Policy) Check(ctx context.Context, rawURL string) error {
	if err := p.Match(rawURL); err != nil {
		return err
	}
	t, _ := parseTarget(rawURL)
	addrs, err := p.targetAddresses(ctx, t)
	if err != nil {
		return err
	}
	named := p.namedFor(t)
	var refused []string
	for _, a := range addrs {
		if class := p.forbiddenAs(named, t.host, a); class != "" {
			refused = append(refused, fmt.Sprintf("%s (%s)", a, class))
		}
	}
	if len(refused) == 0 {
		return nil
	}
	if t.ip.IsValid() {
		return invalid("%s URL %s: %s is not a public address, and %s does not name it", p.use, t.display, refused[0], p.key)
	}
	return invalid("%s URL %s: host %s resolves to %s, and %s does not name the host or address", p.use, t.display, t.host, strings.Join(refused, ", "), p.key)
}

func (p *Policy) matches(canon string) bool {
	for _, pat := range p.patterns {
		if pat.match(canon) {
			return true
		}
	}
	return false
}

func (p *Policy) patternList() []string {
	var out []string
	for _, pat := range p.patterns {
		out = append(out, pat.raw)
	}
	return out
}

// Resolve returns the canonical form of a host as it appears in a dial
// address (an IP literal or a name) and the addresses to connect to: the
// IP itself, or the resolver's answer. A metadata host name the patterns do
// not name is refused with an *AddressError without being resolved; every
// other failure is an *manent.Error. Resolve does not judge the addresses:
// call Permit for each.
func (p *Policy) Resolve(ctx context.Context, rawHost string) (string, []netip.Addr, error) {
	host, ip, err := canonicalHost(rawHost)
	if err != nil {
		return "", nil, invalid("%s host %q: %v", p.use, rawHost, err)
	}
	addrs, err := p.addresses(ctx, host, ip)
	return host, addrs, err
}

// Permit returns nil if a connection for host (canonical, from Resolve)
// may go to a, else an *AddressError.
func (p *Policy) Permit(host string, a netip.Addr) error {
	if class := p.forbidden(host, a); class != "" {
		return &AddressError{Key: p.key, Host: host, Addr: a.Unmap().WithZone(""), Class: class}
	}
	return nil
}

// addresses returns the addresses of host: ip itself when valid, else the
// resolver's answer. Errors are *AddressError for a refused metadata host
// name, *manent.Error otherwise.
func (p *Policy) addresses(ctx context.Context, host string, ip netip.Addr) ([]netip.Addr, error) {
	if ip.IsValid() {
		return []netip.Addr{ip}, nil
	}
	if isMetadataHost(host) && !p.hosts[host] {
		return nil, &AddressError{Key: p.key, Host: host, Class: classMetadata}
	}
	res, err := p.resolver.LookupIPAddr(ctx, host)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return nil, invalid("%s host %s does not resolve (no such host)", p.use, host)
		}
		return nil, manent.Errorf(manent.EUnavailable, "cannot resolve %s host %s now; retry later", p.use, host)
	}
	var addrs []netip.Addr
	for _, r := range res {
		if a, ok := netip.AddrFromSlice(r.IP); ok {
			addrs = append(addrs, a.Unmap().WithZone(r.Zone))
		}
	}
	if len(addrs) == 0 {
		return nil, invalid("%s host %s has no address", p.use, host)
	}
	return addrs, nil
}

// namedFor reports whether a pattern that names t's host literally
// matches t: only those patterns open the host's non-public addresses to
// a URL. A host named by `http://10.0.0.5:8080/api/**` is not opened on
// another port or path by a wildcard pattern such as `http://*:*/**`.
func (p *Policy) namedFor(t target) bool {
	if !p.hosts[t.host] {
		return false
	}
	for _, pat := range p.patterns {
		if pat.host == t.host && pat.match(t.canon) {
			return true
		}
	}
	return false
}

// CheckScope refuses rawURL when a pattern names its host literally, no
// such pattern matches rawURL (a wildcard one does), and an address of the
// host is one only that naming permits (private, loopback, link-local). The
// dialer permits a named host's addresses by host alone (Permit), so a
// client calls CheckScope for every request after Match: the naming opens
// the host to the URLs of the patterns that name it, not to every port and
// path of a wildcard pattern. A host no pattern names costs nothing here.
func (p *Policy) CheckScope(ctx context.Context, rawURL string) error {
	t, err := parseTarget(rawURL)
	if err != nil || !p.hosts[t.host] || p.namedFor(t) {
		return nil
	}
	addrs, err := p.targetAddresses(ctx, t)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if class := p.forbiddenAs(false, t.host, a); class != "" {
			return invalid("%s URL %s: %s is a %s address, and the patterns of %s that name %s do not match this URL (a wildcard pattern does, which opens public addresses only)",
				p.use, t.display, a.Unmap().WithZone(""), class, p.key, t.host)
		}
	}
	return nil
}

// targetAddresses is addresses for a URL's target, a refused metadata
// host name given as the URL's EInvalid.
func (p *Policy) targetAddresses(ctx context.Context, t target) ([]netip.Addr, error) {
	addrs, err := p.addresses(ctx, t.host, t.ip)
	var ae *AddressError
	if errors.As(err, &ae) {
		return nil, invalid("%s URL %s: %v", p.use, t.display, err)
	}
	return addrs, err
}

// forbidden returns the class of a if a request to host may not reach it,
// or "" if it may: forbiddenAs, with host named when a pattern names it.
func (p *Policy) forbidden(host string, a netip.Addr) string {
	return p.forbiddenAs(p.hosts[host], host, a)
}

// forbiddenAs is forbidden, with named saying whether the request's host
// counts as named by a pattern.
func (p *Policy) forbiddenAs(named bool, host string, a netip.Addr) string {
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
	strict := slices.Contains([]string{classMetadata, classUnspecified}, class)
	if named {
		if ip, err := netip.ParseAddr(host); err == nil && ip == a {
			return "" // an IP URL named by a pattern
		}
		if !strict {
			return "" // a host name named by a pattern
		}
	}
	if p.private && !strict {
		return ""
	}
	return class
}

// AddressError is a request refused because of the address it would
// reach. pkg/egress's dialer fails with it; callers can tell it from a
// network failure with errors.As and not retry.
type AddressError struct {
	Key   string // the allow-list: "callbacks.allow", "artifacts.sources", …
	Host  string
	Addr  netip.Addr // invalid when the host name itself is refused
	Class string     // "loopback", "private", "cloud metadata", …
}

func (e *AddressError) Error() string {
	key := e.Key
	if key == "" {
		key = "the allow-list"
	}
	if !e.Addr.IsValid() {
		return fmt.Sprintf("host %s is a %s host name, which %s does not name", e.Host, e.Class, key)
	}
	if e.Host == e.Addr.WithZone("").String() {
		return fmt.Sprintf("%s is a %s address, which %s does not name", e.Addr, e.Class, key)
	}
	return fmt.Sprintf("host %s resolves to %s, a %s address, which %s does not name", e.Host, e.Addr, e.Class, key)
}
