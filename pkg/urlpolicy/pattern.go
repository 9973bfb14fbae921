package urlpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/manent-io/manent/pkg/manent"
)

// pattern is one compiled URL pattern.
type pattern struct {
	raw string
	re  *regexp.Regexp
	// host is the canonical host when the pattern names one without a
	// wildcard ("" otherwise): such a pattern names that host explicitly.
	host string
}

func (p pattern) match(canon string) bool { return p.re.MatchString(canon) }

// compilePattern compiles raw, whose scheme must be one of schemes.
func compilePattern(raw string, schemes []string) (pattern, error) {
	if raw == "" || strings.ContainsAny(raw, " \t\r\n") {
		return pattern{}, errors.New("must be a URL pattern without spaces")
	}
	if strings.ContainsAny(raw, "?#") {
		return pattern{}, errors.New("patterns match scheme, host, port and path: remove the query or fragment")
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	scheme = strings.ToLower(scheme)
	if !ok {
		return pattern{}, errors.New("must look like scheme://host/path")
	}
	if !slices.Contains(schemes, scheme) {
		return pattern{}, fmt.Errorf("scheme %q is not one of %s", scheme, strings.Join(schemes, ", "))
	}
	var b strings.Builder
	b.WriteString("^" + regexp.QuoteMeta(scheme+"://"))
	if rest == "**" { // every URL of the scheme
		b.WriteString(".*$")
		return pattern{raw: raw, re: regexp.MustCompile(b.String())}, nil
	}
	authority, p, _ := strings.Cut(rest, "/")
	host, err := compileAuthority(&b, scheme, authority)
	if err != nil {
		return pattern{}, err
	}
	p, err = url.PathUnescape(p)
	if err != nil {
		return pattern{}, fmt.Errorf("path: %w", err)
	}
	compilePath(&b, "/"+p)
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return pattern{}, err
	}
	return pattern{raw: raw, re: re, host: host}, nil
}

// compileAuthority writes the regexp of host[:port] and returns the
// canonical host if it has no wildcard.
func compileAuthority(b *strings.Builder, scheme, authority string) (string, error) {
	if strings.Contains(authority, "**") {
		return "", errors.New(`"**" may not be used in the host: use "*" for one run of host characters, or scheme://** for every URL`)
	}
	if strings.Contains(authority, "@") {
		return "", errors.New("patterns must not contain credentials")
	}
	if scheme == "file" {
		if authority != "" && authority != "localhost" {
			return "", errors.New("file patterns must not name a host: file:///path")
		}
		return "", nil
	}
	host, port, err := splitPatternAuthority(authority)
	if err != nil {
		return "", err
	}
	var literal string
	if strings.Contains(host, "*") {
		// A host wildcard matches host characters only: never a port, a
		// path or credentials.
		parts := strings.Split(strings.ToLower(host), "*")
		for i, part := range parts {
			if i > 0 {
				b.WriteString(`[a-z0-9._-]*`)
			}
			b.WriteString(regexp.QuoteMeta(part))
		}
	} else {
		h, ip, err := canonicalHost(host)
		if err != nil {
			return "", err
		}
		literal = h
		b.WriteString(regexp.QuoteMeta(urlHost(h, ip)))
	}
	switch port {
	case "":
		b.WriteString(":" + defaultPort(scheme))
	case "*":
		b.WriteString(":[0-9]+")
	default:
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("port %q is not a number in 1-65535 or *", port)
		}
		b.WriteString(":" + strings.TrimLeft(port, "0"))
	}
	return literal, nil
}

// splitPatternAuthority splits host[:port] or [ipv6][:port].
func splitPatternAuthority(a string) (host, port string, err error) {
	if a == "" {
		return "", "", errors.New("the host is missing")
	}
	if strings.HasPrefix(a, "[") {
		end := strings.Index(a, "]")
		if end < 0 {
			return "", "", errors.New("unclosed [ in the host")
		}
		host, rest := a[1:end], a[end+1:]
		if rest != "" && !strings.HasPrefix(rest, ":") {
			return "", "", errors.New("unexpected text after ]")
		}
		if strings.Contains(host, "*") {
			return "", "", errors.New("an IPv6 host cannot have wildcards")
		}
		return host, strings.TrimPrefix(rest, ":"), nil
	}
	host, port, _ = strings.Cut(a, ":")
	if strings.Contains(port, ":") {
		return "", "", errors.New("write an IPv6 host in brackets: [::1]")
	}
	if host == "" {
		return "", "", errors.New("the host is missing")
	}
	return host, port, nil
}

// compilePath writes the regexp of a decoded path pattern: "/**/" matches
// "/" or any run of segments, "**" any rest, "*" within a segment.
func compilePath(b *strings.Builder, p string) {
	var lit strings.Builder
	flush := func() {
		b.WriteString(regexp.QuoteMeta(lit.String()))
		lit.Reset()
	}
	for i := 0; i < len(p); {
		switch {
		case strings.HasPrefix(p[i:], "/**/"):
			flush()
			b.WriteString("/(?:.*/)?")
			i += 4
		case strings.HasPrefix(p[i:], "**"):
			flush()
			b.WriteString(".*")
			i += 2
		case p[i] == '*':
			flush()
			b.WriteString("[^/]*")
			i++
		default:
			lit.WriteByte(p[i])
			i++
		}
	}
	flush()
}

// target is a parsed URL in the canonical form patterns match.
type target struct {
	canon   string     // scheme://host:port/path, or file:///path
	scheme  string     // lower case
	host    string     // canonical; "" for file
	ip      netip.Addr // valid when host is an IP literal
	display string     // quoted, for messages: no credentials, no query values
}

// parseTarget parses raw and refuses what could slip past a pattern. The
// returned display is set even with an error.
func parseTarget(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return target{display: quoteRaw(raw)}, errors.New("is not a valid URL")
	}
	t := target{scheme: strings.ToLower(u.Scheme), display: strconv.Quote(display(u))}
	if u.Scheme == "" {
		return t, errors.New("must be an absolute URL (scheme://host/path)")
	}
	if u.Opaque != "" {
		return t, errors.New("must look like scheme://host/path")
	}
	if u.User != nil {
		return t, errors.New("must not contain credentials")
	}
	p := u.Path
	if p == "" {
		p = "/"
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return t, errors.New(`must not contain ".." path segments`)
		}
	}
	if strings.IndexFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return t, errors.New("must not contain control characters")
	}
	if t.scheme == "file" {
		if h := u.Hostname(); (h != "" && !strings.EqualFold(h, "localhost")) || u.Port() != "" {
			return t, fmt.Errorf("a file URL names no host, only an absolute path on the server's machine (file:///path/to/artifact.tar.gz): %q stands where the host goes", manent.ClipText(u.Host, 80))
		}
		t.canon = "file://" + p
		return t, nil
	}
	if u.Host == "" {
		return t, errors.New("the host is missing")
	}
	t.host, t.ip, err = canonicalHost(u.Hostname())
	if err != nil {
		return t, err
	}
	port := u.Port()
	if port == "" {
		port = defaultPort(t.scheme)
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return t, errors.New("the port must be a number in 1-65535")
	} else {
		port = strconv.Itoa(n)
	}
	t.canon = t.scheme + "://" + urlHost(t.host, t.ip) + ":" + port + p
	return t, nil
}

// canonicalHost lower-cases h, drops a trailing dot and writes IP
// addresses in their canonical form (IPv4-mapped IPv6 as IPv4).
func canonicalHost(h string) (string, netip.Addr, error) {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if h == "" {
		return "", netip.Addr{}, errors.New("the host is missing")
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		if ip.Zone() != "" {
			return "", netip.Addr{}, errors.New("the host must not have an IPv6 zone")
		}
		ip = ip.Unmap()
		return ip.String(), ip, nil
	}
	if strings.ContainsAny(h, "[]%/\\@") {
		return "", netip.Addr{}, fmt.Errorf("%q is not a host name", h)
	}
	return h, netip.Addr{}, nil
}

func urlHost(h string, ip netip.Addr) string {
	if ip.Is6() {
		return "[" + h + "]"
	}
	return h
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// display is u for messages: credentials dropped and query values hidden
// (a signed URL's query is a secret).
func display(u *url.URL) string {
	d := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	s := d.String()
	if u.RawQuery != "" {
		s += "?…"
	}
	return s
}

// quoteRaw quotes a URL that did not parse, shortened and without what
// looks like credentials.
func quoteRaw(raw string) string {
	if scheme, rest, ok := strings.Cut(raw, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			raw = scheme + "://…@" + rest[at+1:]
		}
	}
	if len(raw) > 200 {
		raw = raw[:200] + "…"
	}
	return strconv.Quote(raw)
}
