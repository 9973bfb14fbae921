package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/manent-io/manent/pkg/egress"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/urlpolicy"
)

const (
	// discoveryRetryInterval bounds how often a failed discovery is retried.
	discoveryRetryInterval = 5 * time.Second
	// keysRefreshInterval bounds how often the JWKS is fetched again.
	keysRefreshInterval = 5 * time.Second
	// defaultOIDCTimeout is the timeout of the default issuer client.
	defaultOIDCTimeout = 10 * time.Second
)

// signingAlgs are the accepted JWS algorithms: asymmetric ones only, never
// "none" nor HMAC.
func signingAlgs() []string {
	return []string{
		oidc.RS256, oidc.RS384, oidc.RS512,
		oidc.ES256, oidc.ES384, oidc.ES512,
		oidc.PS256, oidc.PS384, oidc.PS512,
		oidc.EdDSA,
	}
}

// oidcVerifier verifies OIDC JWTs. The go-oidc provider is created on first
// use and kept; a failed discovery is remembered for discoveryRetryInterval.
type oidcVerifier struct {
	cfg    OIDCConfig
	client *http.Client // for discovery and the JWKS
	now    func() time.Time
	logger *slog.Logger

	verifier atomic.Pointer[oidc.IDTokenVerifier]

	// discovering holds one token while a goroutine runs discovery; it
	// guards lastFailure.
	discovering chan struct{}
	lastFailure time.Time
}

// validateOIDC checks cfg and fills in the defaults.
func validateOIDC(cfg OIDCConfig) (OIDCConfig, []manent.FieldError) {
	var errs []manent.FieldError
	u, err := url.Parse(cfg.Issuer)
	switch {
	case cfg.Issuer == "":
		errs = append(errs, manent.FieldError{Path: "auth.oidc.issuer", Message: "is required"})
	case err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		errs = append(errs, manent.FieldError{Path: "auth.oidc.issuer", Message: fmt.Sprintf("%q is not an issuer URL (https://host[/path])", cfg.Issuer)})
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopbackHost(u.Hostname()):
	default:
		errs = append(errs, manent.FieldError{Path: "auth.oidc.issuer", Message: fmt.Sprintf("%q must use https (http only on a loopback host)", cfg.Issuer)})
	}
	if cfg.Audience == "" {
		errs = append(errs, manent.FieldError{Path: "auth.oidc.audience", Message: "is required: the client ID tokens must be issued for"})
	}
	if cfg.Claim == "" {
		cfg.Claim = "email"
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	return cfg, errs
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IssuerClient is the outbound client for the OIDC issuer of cfg (its
// discovery, keys and token endpoint): the issuer may be a private host
// (the operator named it); its JWKS may live on another, public, https host.
func IssuerClient(cfg OIDCConfig) *http.Client {
	allow := append([]string{"https://**"}, egress.Origins(cfg.Issuer)...)
	return egress.New(egress.Policy{
		Outbound:     urlpolicy.Outbound{Use: "OIDC request", Key: "auth.oidc.issuer", Allow: allow},
		Timeout:      defaultOIDCTimeout,
		MaxRedirects: 5,
	})
}

func newOIDCVerifier(cfg OIDCConfig, client *http.Client, now func() time.Time, logger *slog.Logger) *oidcVerifier {
	if client == nil {
		client = IssuerClient(cfg)
	}
	return &oidcVerifier{
		cfg:         cfg,
		client:      client,
		now:         now,
		logger:      logger,
		discovering: make(chan struct{}, 1),
	}
}

// idTokenVerifier returns the go-oidc verifier, running discovery if no
// earlier call has succeeded and the last failure is old enough.
func (o *oidcVerifier) idTokenVerifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	if v := o.verifier.Load(); v != nil {
		return v, nil
	}
	select {
	case o.discovering <- struct{}{}:
		defer func() { <-o.discovering }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if v := o.verifier.Load(); v != nil {
		return v, nil
	}
	if !o.lastFailure.IsZero() && o.now().Sub(o.lastFailure) < discoveryRetryInterval {
		return nil, o.unavailable()
	}
	jwksURI, err := o.discover(ctx)
	if err != nil {
		if ctx.Err() == nil { // the caller giving up says nothing about the issuer
			o.lastFailure = o.now()
		}
		o.logger.Warn("oidc discovery failed", "issuer", o.cfg.Issuer, "error", err)
		return nil, o.unavailable()
	}
	v := oidc.NewVerifier(o.cfg.Issuer, newKeySet(jwksURI, o.client, o.now), &oidc.Config{
		ClientID:             o.cfg.Audience,
		SupportedSigningAlgs: signingAlgs(),
		Now:                  o.now,
	})
	o.verifier.Store(v)
	o.lastFailure = time.Time{}
	return v, nil
}

// discover reads the discovery document and returns the JWKS URL. go-oidc
// checks that the document names the configured issuer.
func (o *oidcVerifier) discover(ctx context.Context) (string, error) {
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, o.client), o.cfg.Issuer)
	if err != nil {
		return "", err
	}
	var meta struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := provider.Claims(&meta); err != nil {
		return "", err
	}
	u, err := url.Parse(meta.JWKSURI)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("discovery document: jwks_uri %q is not an http(s) URL", meta.JWKSURI)
	}
	return meta.JWKSURI, nil
}

// unavailable reports a failed discovery. The cause is logged, not
// returned: it may quote the issuer's response.
func (o *oidcVerifier) unavailable() error {
	return manent.Errorf(manent.EUnavailable, "OIDC issuer %s is unavailable (discovery failed; retried at most every %s)", o.cfg.Issuer, discoveryRetryInterval)
}

// verify checks raw, a compact JWT, and returns its identity.
func (o *oidcVerifier) verify(ctx context.Context, raw string) (manent.Identity, error) {
	// Refuse a bad header before any network I/O, with a precise message.
	if err := checkJWTHeader(raw); err != nil {
		return manent.Identity{}, err
	}
	v, err := o.idTokenVerifier(ctx)
	if err != nil {
		return manent.Identity{}, err
	}
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		o.logger.Info("oidc token refused", "error", err)
		return manent.Identity{}, o.refusal(err)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return manent.Identity{}, unauthorized("OIDC token claims are not a JSON object")
	}
	if err := o.checkAuthorizedParty(tok.Audience, claims); err != nil {
		return manent.Identity{}, err
	}
	subject := tok.Subject
	if o.cfg.Claim != "sub" {
		s, _ := claims[o.cfg.Claim].(string)
		subject = s
	}
	if subject == "" {
		return manent.Identity{}, unauthorized(fmt.Sprintf("OIDC token has no %q claim (auth.oidc.claim)", o.cfg.Claim))
	}
	if o.cfg.Claim == "email" {
		switch v, ok := claims["email_verified"]; {
		case ok && v != true && v != "true":
			return manent.Identity{}, unauthorized(fmt.Sprintf("OIDC token's email is not verified (email_verified is %.20s)", jsonOf(v)))
		case !ok && (o.cfg.RequireEmailVerified == nil || *o.cfg.RequireEmailVerified):
			return manent.Identity{}, unauthorized(`OIDC token does not say its email is verified (no email_verified claim): ` +
				`have the issuer send it, name the identity by another claim (auth.oidc.claim: sub), ` +
				`or set auth.oidc.require_email_verified: false if this issuer vouches for every address`)
		}
	}
	return manent.Identity{Subject: "oidc:" + subject, Groups: groupsOf(claims[o.cfg.GroupsClaim])}, nil
}

// checkAuthorizedParty refuses a token for several audiences that was not
// issued to manent (OIDC Core 3.1.3.7; go-oidc checks only that aud holds
// ours): its azp, the client it was issued to, must be auth.oidc.audience.
// Without the check, a token another client of the same issuer obtained
// for itself and a second audience of ours — and may pass on, or leak —
// signs in to manent. A token for manent alone is taken whatever its azp:
// issued through another client of the same provider (Google's cross-client
// ID tokens name it in azp), it is still for us.
func (o *oidcVerifier) checkAuthorizedParty(aud []string, claims map[string]any) error {
	if len(aud) < 2 {
		return nil
	}
	want := o.cfg.Audience
	azp, ok := claims["azp"]
	if !ok {
		return unauthorized(fmt.Sprintf("OIDC token is for %d audiences and does not say which it was issued to (no azp claim): "+
			"a token with several audiences must carry azp %q (auth.oidc.audience); have the issuer add it, or give the token %q as its only audience",
			len(aud), want, want))
	}
	if azp == want {
		return nil
	}
	got := jsonOf(azp)
	if len(got) > 64 {
		got = manent.ClipText(got, 64)
	}
	return unauthorized(fmt.Sprintf("OIDC token is for %d audiences and was issued to %s (its azp), not to %q (auth.oidc.audience): "+
		"have the issuer issue it to manent's client, or give it %q as its only audience", len(aud), got, want, want))
}

// refusal maps a go-oidc verification error to the domain error. go-oidc
// formats most errors with %v (the key set's too), so all but expiry are
// told apart by text; the tests pin each case. The original error goes to the log only: it may
// name keys or echo the issuer's responses.
func (o *oidcVerifier) refusal(err error) error {
	var expired *oidc.TokenExpiredError
	msg := err.Error()
	switch {
	case errors.As(err, &expired):
		return unauthorized(fmt.Sprintf("OIDC token expired at %s", expired.Expiry.UTC().Format(time.RFC3339)))
	case strings.Contains(msg, "malformed jwt"):
		return unauthorized("malformed OIDC token")
	case strings.Contains(msg, "issued by a different provider"):
		return unauthorized(fmt.Sprintf("OIDC token was not issued by %s", o.cfg.Issuer))
	case strings.Contains(msg, "expected audience"):
		return unauthorized(fmt.Sprintf("OIDC token audience does not include %q", o.cfg.Audience))
	case strings.Contains(msg, "before the nbf"):
		return unauthorized("OIDC token is not valid yet (nbf)")
	case strings.Contains(msg, errKeysUnavailable):
		return &manent.Error{Code: manent.EUnavailable, Message: fmt.Sprintf("cannot fetch the signing keys of OIDC issuer %s; retry later", o.cfg.Issuer)}
	case strings.Contains(msg, errKeysNoMatch):
		return unauthorized(fmt.Sprintf("OIDC token signature does not verify with the issuer's keys (fetched again at most every %s)", keysRefreshInterval))
	default:
		return unauthorized("OIDC token is not valid")
	}
}

// checkJWTHeader refuses a token whose header cannot be read or names an
// algorithm that is not accepted (notably "none").
func checkJWTHeader(raw string) error {
	head, _, _ := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return unauthorized("malformed OIDC token: the header is not base64url")
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return unauthorized("malformed OIDC token: the header is not a JSON object")
	}
	if !slices.Contains(signingAlgs(), h.Alg) {
		alg := h.Alg
		if len(alg) > 16 {
			alg = alg[:16] + "…"
		}
		return unauthorized(fmt.Sprintf("OIDC token algorithm %q is not accepted (want one of %s)", alg, strings.Join(signingAlgs(), ", ")))
	}
	return nil
}

// groupsOf reads a groups claim: an array of strings or one string.
func groupsOf(v any) []string {
	switch g := v.(type) {
	case string:
		if g != "" {
			return []string{g}
		}
	case []any:
		var out []string
		for _, e := range g {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// jsonOf is v as JSON, for a message.
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
