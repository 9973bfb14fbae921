package auth

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// Authenticator turns an Authorization header into an Identity.
type Authenticator struct {
	tokens []staticToken
	oidc   *oidcVerifier // nil without auth.oidc
}

// New validates cfg and returns an Authenticator. It does no network I/O:
// OIDC discovery happens on the first JWT. Configuration mistakes are an
// *manent.Error with code EInvalid and one field error per mistake.
func New(cfg Config) (*Authenticator, error) {
	tokens, errs := parseTokens(cfg.Tokens, cfg.BootstrapToken)
	var oc OIDCConfig
	if cfg.OIDC != nil {
		var oerrs []manent.FieldError
		oc, oerrs = validateOIDC(*cfg.OIDC)
		errs = append(errs, oerrs...)
	}
	if len(errs) > 0 {
		return nil, &manent.Error{Code: manent.EInvalid, Message: "invalid auth configuration", Fields: errs}
	}
	a := &Authenticator{tokens: tokens}
	if cfg.OIDC != nil {
		now := cfg.Now
		if now == nil {
			now = time.Now
		}
		logger := cfg.Logger
		if logger == nil {
			logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		}
		a.oidc = newOIDCVerifier(oc, cfg.HTTPClient, now, logger)
	}
	return a, nil
}

// jwtRE is the shape of a compact JWS: three base64url parts, the
// signature possibly empty (as in an "alg: none" token, which the verifier
// then refuses).
var jwtRE = regexp.MustCompile(`^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$`)

// Authenticate returns the identity of an Authorization header value
// ("Bearer <token>"). A JWT goes to the OIDC verifier when auth.oidc is
// configured; anything else is looked up among the static tokens.
//
// Errors are *manent.Error: EUnauthorized for a missing, malformed, unknown,
// expired or otherwise invalid credential, EUnavailable when the OIDC issuer
// cannot be reached. Messages never contain the token.
func (a *Authenticator) Authenticate(ctx context.Context, authorization string) (manent.Identity, error) {
	token, err := bearerToken(authorization)
	if err != nil {
		return manent.Identity{}, err
	}
	if jwtRE.MatchString(token) {
		if a.oidc != nil {
			return a.oidc.verify(ctx, token)
		}
		if t, ok := lookupToken(a.tokens, token); ok {
			return t.identity(), nil
		}
		return manent.Identity{}, unauthorized("unknown token (it looks like a JWT, but OIDC is not configured)")
	}
	if t, ok := lookupToken(a.tokens, token); ok {
		return t.identity(), nil
	}
	return manent.Identity{}, unauthorized("unknown token")
}

// TokenGroups returns the groups of the static token (or bootstrap token)
// named name, and false when this server has no such token: it was
// removed from auth.tokens, revoked.
func (a *Authenticator) TokenGroups(name string) ([]string, bool) {
	for _, t := range a.tokens {
		if t.name == name {
			return slices.Clone(t.groups), true
		}
	}
	return nil, false
}

func (t staticToken) identity() manent.Identity {
	return manent.Identity{Subject: "token:" + t.name, Groups: slices.Clone(t.groups)}
}

// bearerToken extracts the token of "Bearer <token>"; the scheme is
// case-insensitive (RFC 7235).
func bearerToken(h string) (string, error) {
	h = strings.TrimSpace(h)
	if h == "" {
		return "", unauthorized(`authentication required: send "Authorization: Bearer <token>"`)
	}
	scheme, token, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", unauthorized(`the Authorization header must use the Bearer scheme: "Authorization: Bearer <token>"`)
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", unauthorized("the bearer token is empty")
	}
	return token, nil
}

func unauthorized(msg string) error {
	return &manent.Error{Code: manent.EUnauthorized, Message: msg}
}
