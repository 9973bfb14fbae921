package urlpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

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

func callbackSchemes() []string { return []string{"http", "https"} }

// Validate reports mistakes in Allow as an *manent.Error with code EInvalid
// and a field error per entry ("callbacks.allow[2]").
func (c Callbacks) Validate() error {
	_, err := c.compile()
	return err
}

// Outbound returns the callback policy as the rules of an outbound use:
// what pkg/egress sends callbacks through.
func (c Callbacks) Outbound() Outbound {
	return Outbound{Use: "callback", Key: "callbacks.allow", Allow: c.Allow, Resolver: c.Resolver}
}

func (c Callbacks) compile() (*Policy, error) { return c.Outbound().Compile() }

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
	return p.Check(ctx, rawURL)
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
		err := p.Check(ctx, raw)
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

// badPolicy reports a mistake in an allow-list (callbacks.allow, …) found
// while checking a URL: the server's configuration is wrong, not the
// submitted URL, so it is not an EInvalid (use Validate at startup).
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
