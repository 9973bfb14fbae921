package urlpolicy

import (
	"net/netip"
	"testing"
)

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestClassify(t *testing.T) {
	tests := []struct {
		addr string
		want string
	}{
		{"93.184.216.34", ""},
		{"8.8.8.8", ""},
		{"2606:4700::1111", ""},
		{"127.0.0.1", classLoopback},
		{"127.255.0.1", classLoopback},
		{"::1", classLoopback},
		{"::ffff:127.0.0.1", classLoopback},
		{"10.0.0.1", classPrivate},
		{"172.16.0.1", classPrivate},
		{"192.168.0.1", classPrivate},
		{"fc00::1", classPrivate},
		{"169.254.1.1", classLinkLocal},
		{"fe80::1%eth0", classLinkLocal},
		{"0.0.0.0", classUnspecified},
		{"::", classUnspecified},
		{"169.254.169.254", classMetadata},
		{"fd00:ec2::254", classMetadata},
		{"100.100.100.200", classMetadata},
		{"0.1.2.3", `"this network"`},
		{"100.64.0.1", "shared address space (carrier-grade NAT)"},
		{"224.0.0.1", "multicast"},
		{"255.255.255.255", "reserved"},
		{"::7f00:1", "IPv4-compatible IPv6"},
		{"64:ff9b::a00:1", "NAT64 of private"},
		{"64:ff9b::5db8:d822", ""}, // NAT64 of a public address
		{"2002:7f00:1::", "6to4 of loopback"},
		{"2002:5db8:d822::", ""},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			if got := classify(mustAddr(t, tt.addr)); got != tt.want {
				t.Fatalf("classify(%s) = %q, want %q", tt.addr, got, tt.want)
			}
		})
	}
}
