package budget

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the reverse proxies (trusted_proxies) whose X-Forwarded-For
// names the client of a request. Empty, X-Forwarded-For is read for
// nothing: any client can write it.
type Proxies []netip.Prefix

// ParseProxies reads trusted_proxies: CIDR ranges ("10.0.0.0/8") or single
// addresses ("192.0.2.7"). The error names the first entry that is neither.
func ParseProxies(list []string) (Proxies, error) {
	out := make(Proxies, 0, len(list))
	for i, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("entry %d, %q, is not an address or a CIDR range (e.g. 10.0.0.0/8, 192.0.2.7 or fd00::/8)", i+1, s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// trusts says whether a is one of the proxies.
func (p Proxies) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, pr := range p {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

// ClientAddr returns the address of r's client: the connection's, or, when
// the connection comes from a trusted proxy, the right-most address of
// X-Forwarded-For that is not a trusted proxy — each proxy appends the
// address it was reached from, so what lies left of the first untrusted
// one the client wrote itself and is ignored. An entry that is not an
// address ends the walk at the proxy that appended it.
func (p Proxies) ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if len(p) == 0 || !p.trusts(peer) {
		return peer.Unmap().WithZone("").String()
	}
	client := peer
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := forwardedAddr(hops[i])
		if !ok {
			break
		}
		client = a
		if !p.trusts(a) {
			break
		}
	}
	return client.Unmap().WithZone("").String()
}

// forwardedAddr reads one X-Forwarded-For entry: an address, possibly
// with a port ("192.0.2.7:4711", "[2001:db8::1]:4711").
func forwardedAddr(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a, true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr(), true
	}
	return netip.Addr{}, false
}

// ClientKey is the key r's client counts against in the per-address
// budgets (refused sign-ins, refused credentials): ClientAddr, an IPv6
// address by its /64 (a client holds a whole prefix).
func (p Proxies) ClientKey(r *http.Request) string {
	s := p.ClientAddr(r)
	a, err := netip.ParseAddr(s)
	if err != nil {
		return s
	}
	if a.Is6() {
		pr, _ := a.Prefix(64)
		return pr.String()
	}
	return a.String()
}
