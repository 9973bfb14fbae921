package auth

import (
	"log/slog"
	"net/http"
	"time"
)

// TokenConfig is one static token of `auth.tokens` (SPEC §8.1). The token
// itself is never stored: SHA256 is the hex SHA-256 of it (see HashToken).
type TokenConfig struct {
	Name   string   `mapstructure:"name" yaml:"name"`
	SHA256 string   `mapstructure:"sha256" yaml:"sha256"`
	Groups []string `mapstructure:"groups" yaml:"groups,omitempty"`
}

// OIDCConfig is `auth.oidc` (SPEC §8.1).
type OIDCConfig struct {
	// Issuer is the issuer URL; discovery reads
	// <Issuer>/.well-known/openid-configuration. It must be https, except
	// on a loopback host.
	Issuer string `mapstructure:"issuer" yaml:"issuer"`
	// Audience must be in the token's "aud" claim.
	Audience string `mapstructure:"audience" yaml:"audience"`
	// Claim names the claim that becomes the identity "oidc:<value>":
	// "email" (the default) or "sub", or another string claim.
	Claim string `mapstructure:"claim" yaml:"claim,omitempty"`
	// GroupsClaim names the claim holding the groups, an array of strings
	// or a single string. Default "groups".
	GroupsClaim string `mapstructure:"groups_claim" yaml:"groups_claim,omitempty"`
	// RequireEmailVerified (default true), when Claim is "email", refuses
	// a token without `"email_verified": true`: an issuer that does not
	// vouch for the address may let a user write anyone's (and so sign in
	// as them, or approve in their name). False accepts a token that has
	// no email_verified claim at all; `false` is refused either way.
	RequireEmailVerified *bool `mapstructure:"require_email_verified" yaml:"require_email_verified,omitempty"`
	// ClientID, when set, turns on the web UI's sign-in through the issuer
	// (authorization code flow with PKCE, pkg/web). The ID tokens it gets
	// are checked like bearer tokens, so their "aud" must hold Audience:
	// usually ClientID is Audience.
	ClientID string `mapstructure:"client_id" yaml:"client_id,omitempty"`
	// ClientSecret is the secret of a confidential client (empty for a
	// public one, which PKCE protects).
	ClientSecret string `mapstructure:"client_secret" yaml:"client_secret,omitempty"`
}

// Config configures an Authenticator.
type Config struct {
	// Tokens are the static tokens.
	Tokens []TokenConfig
	// OIDC, when set, makes JWT bearer tokens go to the OIDC verifier.
	OIDC *OIDCConfig
	// BootstrapToken, when set, is the one-time admin token of SPEC §8.1:
	// it authenticates as BootstrapSubject in the group "admins". Pair it
	// with BootstrapRule in the policy.
	BootstrapToken string
	// HTTPClient talks to the OIDC issuer. Nil means a client with a 10 s
	// timeout.
	HTTPClient *http.Client
	// Logger receives the verifier's reasons for refusing a token, which
	// are not sent to the client. Nil discards them.
	Logger *slog.Logger
	// Now is the clock for token expiry and retry intervals. Nil means
	// time.Now.
	Now func() time.Time
}
