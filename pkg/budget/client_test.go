package budget

import (
	"net/http"
	"testing"
)

// ClientKey counts by the connection's address unless it is a trusted
// proxy; then by the right-most X-Forwarded-For address that is not one.
func TestClientKey(t *testing.T) {
	proxies, err := ParseProxies([]string{"10.0.0.0/8", "192.0.2.7", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		proxies Proxies
		remote  string
		xff     []string
		want    string
	}{
		{"no proxies: the peer", nil, "203.0.113.9:4711", []string{"198.51.100.1"}, "203.0.113.9"},
		{"IPv6 peer by its /64", nil, "[2001:db8:1:2:3:4:5:6]:4711", nil, "2001:db8:1:2::/64"},
		{"IPv4-mapped peer", nil, "[::ffff:203.0.113.9]:4711", nil, "203.0.113.9"},
		{"untrusted peer writes what it likes", proxies, "203.0.113.9:1", []string{"198.51.100.1"}, "203.0.113.9"},
		{"trusted peer, no header", proxies, "10.1.2.3:1", nil, "10.1.2.3"},
		{"trusted peer, one client", proxies, "10.1.2.3:1", []string{"198.51.100.1"}, "198.51.100.1"},
		{"client-written entries left of it ignored", proxies, "10.1.2.3:1", []string{"1.1.1.1, 198.51.100.1"}, "198.51.100.1"},
		{"through two proxies", proxies, "10.1.2.3:1", []string{"1.1.1.1, 198.51.100.1, 192.0.2.7"}, "198.51.100.1"},
		{"several header lines", proxies, "10.1.2.3:1", []string{"1.1.1.1", "198.51.100.1,10.9.9.9"}, "198.51.100.1"},
		{"entry with a port", proxies, "10.1.2.3:1", []string{"198.51.100.1:5555"}, "198.51.100.1"},
		{"IPv6 client by its /64", proxies, "[fd00::1]:1", []string{"2001:db8::1"}, "2001:db8::/64"},
		{"garbage ends the walk at its proxy", proxies, "10.1.2.3:1", []string{"198.51.100.1, unknown, 192.0.2.7"}, "192.0.2.7"},
		{"all trusted: the left-most", proxies, "10.1.2.3:1", []string{"10.4.4.4, 192.0.2.7"}, "10.4.4.4"},
	} {
		r := &http.Request{RemoteAddr: tt.remote, Header: http.Header{}}
		for _, v := range tt.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := tt.proxies.ClientKey(r); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	if _, err := ParseProxies([]string{"10.0.0.0/8", "fe80::1%eth0"}); err == nil {
		t.Error("an address with a zone was accepted")
	}
}
