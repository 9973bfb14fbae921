package urlpolicy

import (
	"net/netip"
	"strings"
)

// Address classes a callback may not reach unless the allow-list names
// them. The empty class is an ordinary public address.
const (
	classMetadata    = "cloud metadata"
	classUnspecified = "unspecified"
	classLoopback    = "loopback"
	classPrivate     = "private"
	classLinkLocal   = "link-local"
)

// classify returns why a may not be called without an explicit allow
// entry, or "" for a public address.
func classify(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if isMetadataAddr(a) {
		return classMetadata
	}
	switch {
	case a.IsUnspecified():
		return classUnspecified
	case a.IsLoopback():
		return classLoopback
	case a.IsPrivate():
		return classPrivate
	case a.IsLinkLocalUnicast():
		return classLinkLocal
	case a.IsMulticast():
		return "multicast"
	}
	for _, r := range []struct{ prefix, class string }{
		{"0.0.0.0/8", `"this network"`},
		{"100.64.0.0/10", "shared address space (carrier-grade NAT)"},
		{"192.0.0.0/24", "IETF protocol assignments"},
		{"198.18.0.0/15", "benchmarking"},
		{"240.0.0.0/4", "reserved"}, // and 255.255.255.255
		{"::/96", "IPv4-compatible IPv6"},
		{"64:ff9b:1::/48", "local-use NAT64"},
		{"fec0::/10", "site-local"},
	} {
		if netip.MustParsePrefix(r.prefix).Contains(a) {
			return r.class
		}
	}
	// Addresses that embed an IPv4 address reach it through a translator.
	if netip.MustParsePrefix("64:ff9b::/96").Contains(a) {
		b := a.As16()
		if c := classify(netip.AddrFrom4([4]byte(b[12:16]))); c != "" {
			return "NAT64 of " + c
		}
	}
	if netip.MustParsePrefix("2002::/16").Contains(a) {
		b := a.As16()
		if c := classify(netip.AddrFrom4([4]byte(b[2:6]))); c != "" {
			return "6to4 of " + c
		}
	}
	return ""
}

// isMetadataAddr reports the cloud instance-metadata endpoints (AWS, GCP,
// Azure, OpenStack; AWS ECS/EKS; Alibaba; AWS over IPv6).
func isMetadataAddr(a netip.Addr) bool {
	switch a.String() {
	case "169.254.169.254", "169.254.170.2", "169.254.170.23", "100.100.100.200",
		"fd00:ec2::254", "fd00:ec2::23":
		return true
	}
	return false
}

// isMetadataHost reports the host names of metadata endpoints.
func isMetadataHost(host string) bool {
	switch strings.ToLower(strings.TrimSuffix(host, ".")) {
	case "metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal":
		return true
	}
	return false
}
