package budget

import (
	"net"
	"net/http"
	"net/netip"
)

// ClientKey is the key a request's client counts against in the
// per-address budgets (refused sign-ins, refused bearer tokens): the
// connection's address, an IPv6 one by its /64 (a client holds a whole
// prefix).
func ClientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	return addressKey(a)
}

// addressKey is a's key: itself, an IPv6 address its /64.
func addressKey(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
