package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/manent-io/manent/pkg/manent"
)

// wantError fails unless err is an *manent.Error with code and a message
// containing msg.
func wantError(t *testing.T, err error, code manent.Code, msg string) {
	t.Helper()
	var e *manent.Error
	if !errors.As(err, &e) {
		t.Fatalf("got error %v (%T), want *manent.Error %s", err, err, code)
	}
	if e.Code != code || !strings.Contains(e.Error(), msg) {
		t.Fatalf("got %s %q, want %s containing %q", e.Code, e.Error(), code, msg)
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestOIDCTokens(t *testing.T) {
	is := newTestIssuer(t)
	clock := newFakeClock()
	now := clock.Now()
	good := is.key()
	stranger := newECKey(t, "k1") // same kid as the published key, other key

	with := func(mut func(map[string]any)) map[string]any {
		c := is.claims(now)
		mut(c)
		return c
	}
	tests := []struct {
		name       string
		token      string
		wantID     manent.Identity
		wantCode   manent.Code
		wantSubstr string
	}{
		{
			name:   "valid",
			token:  is.sign(good, is.claims(now)),
			wantID: manent.Identity{Subject: "oidc:alice@example.com"},
		},
		{
			name:   "groups array",
			token:  is.sign(good, with(func(c map[string]any) { c["groups"] = []any{"sre", "deployers", 7} })),
			wantID: manent.Identity{Subject: "oidc:alice@example.com", Groups: []string{"sre", "deployers"}},
		},
		{
			name:   "groups single string",
			token:  is.sign(good, with(func(c map[string]any) { c["groups"] = "sre" })),
			wantID: manent.Identity{Subject: "oidc:alice@example.com", Groups: []string{"sre"}},
		},
		{
			// OIDC Core 3.1.3.7: a token for several audiences says which
			// one it was issued to (azp); ours, it is accepted.
			name: "audience list containing ours, azp ours",
			token: is.sign(good, with(func(c map[string]any) {
				c["aud"], c["azp"] = []string{"other", "manent"}, "manent"
			})),
			wantID: manent.Identity{Subject: "oidc:alice@example.com"},
		},
		{
			// Issued to "other" (its azp), which may pass it on: with us
			// among its audiences, it would sign in to manent as alice.
			name: "audience list, azp another client",
			token: is.sign(good, with(func(c map[string]any) {
				c["aud"], c["azp"] = []string{"other", "manent"}, "other"
			})),
			wantCode:   manent.EUnauthorized,
			wantSubstr: `OIDC token is for 2 audiences and was issued to "other" (its azp), not to "manent" (auth.oidc.audience): have the issuer issue it to manent's client, or give it "manent" as its only audience`,
		},
		{
			name:       "audience list, no azp",
			token:      is.sign(good, with(func(c map[string]any) { c["aud"] = []string{"other", "manent"} })),
			wantCode:   manent.EUnauthorized,
			wantSubstr: `OIDC token is for 2 audiences and does not say which it was issued to (no azp claim): a token with several audiences must carry azp "manent" (auth.oidc.audience)`,
		},
		{
			name: "audience list, azp not a string",
			token: is.sign(good, with(func(c map[string]any) {
				c["aud"], c["azp"] = []string{"other", "manent"}, []string{"manent"}
			})),
			wantCode:   manent.EUnauthorized,
			wantSubstr: `was issued to ["manent"] (its azp), not to "manent"`,
		},
		{
			// A token for manent alone, issued through another client of
			// the same provider (Google's cross-client ID tokens name it
			// in azp): it is for us.
			name:   "one audience, azp another client",
			token:  is.sign(good, with(func(c map[string]any) { c["azp"] = "android-app" })),
			wantID: manent.Identity{Subject: "oidc:alice@example.com"},
		},
		{
			name:   "one audience in a list, no azp",
			token:  is.sign(good, with(func(c map[string]any) { c["aud"] = []string{"manent"} })),
			wantID: manent.Identity{Subject: "oidc:alice@example.com"},
		},
		{
			name:       "expired",
			token:      is.sign(good, with(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })),
			wantCode:   manent.EUnauthorized,
			wantSubstr: "OIDC token expired at " + now.Add(-time.Minute).UTC().Format(time.RFC3339),
		},
		{
			name:       "not yet valid",
			token:      is.sign(good, with(func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() })),
			wantCode:   manent.EUnauthorized,
			wantSubstr: "not valid yet",
		},
		{
			name:       "wrong audience",
			token:      is.sign(good, with(func(c map[string]any) { c["aud"] = "someone-else" })),
			wantCode:   manent.EUnauthorized,
			wantSubstr: `audience does not include "manent"`,
		},
		{
			name:       "wrong issuer",
			token:      is.sign(good, with(func(c map[string]any) { c["iss"] = "https://evil.example" })),
			wantCode:   manent.EUnauthorized,
			wantSubstr: "was not issued by " + is.srv.URL,
		},
		{
			name:       "signed by another key with a published kid",
			token:      is.sign(stranger, is.claims(now)),
			wantCode:   manent.EUnauthorized,
			wantSubstr: "signature does not verify with the issuer's keys",
		},
		{
			name:       "alg none",
			token:      b64(`{"alg":"none","typ":"JWT"}`) + "." + b64(`{"iss":"`+is.srv.URL+`","aud":"manent","email":"alice@example.com","exp":9999999999}`) + ".",
			wantCode:   manent.EUnauthorized,
			wantSubstr: `algorithm "none" is not accepted`,
		},
		{
			name:       "HMAC refused",
			token:      hmacToken(t, is.claims(now)),
			wantCode:   manent.EUnauthorized,
			wantSubstr: `algorithm "HS256" is not accepted`,
		},
		{
			name:       "header not JSON",
			token:      b64("not json") + "." + b64("{}") + ".c2ln",
			wantCode:   manent.EUnauthorized,
			wantSubstr: "malformed OIDC token: the header is not a JSON object",
		},
		{
			name:       "payload not base64url",
			token:      b64(`{"alg":"ES256","kid":"k1"}`) + ".a.c2ln",
			wantCode:   manent.EUnauthorized,
			wantSubstr: "malformed OIDC token",
		},
		{
			name:       "garbage signature",
			token:      b64(`{"alg":"ES256","kid":"k1"}`) + "." + b64(`{"iss":"x"}`) + ".c2ln",
			wantCode:   manent.EUnauthorized,
			wantSubstr: "OIDC token",
		},
		{
			name:       "no email claim",
			token:      is.sign(good, with(func(c map[string]any) { delete(c, "email") })),
			wantCode:   manent.EUnauthorized,
			wantSubstr: `no "email" claim`,
		},
		{
			name:       "email not verified",
			token:      is.sign(good, with(func(c map[string]any) { c["email_verified"] = false })),
			wantCode:   manent.EUnauthorized,
			wantSubstr: "email is not verified (email_verified is false)",
		},
		{
			// An issuer that does not vouch for the address may let a user
			// write anyone's: alice's, to sign in or approve as her.
			name:       "email verification not said",
			token:      is.sign(good, with(func(c map[string]any) { delete(c, "email_verified") })),
			wantCode:   manent.EUnauthorized,
			wantSubstr: "no email_verified claim): have the issuer send it, name the identity by another claim (auth.oidc.claim: sub), or set auth.oidc.require_email_verified: false",
		},
		{
			name:       "email_verified null",
			token:      is.sign(good, with(func(c map[string]any) { c["email_verified"] = nil })),
			wantCode:   manent.EUnauthorized,
			wantSubstr: "email is not verified (email_verified is null)",
		},
		{
			name:       "email_verified a number",
			token:      is.sign(good, with(func(c map[string]any) { c["email_verified"] = 1 })),
			wantCode:   manent.EUnauthorized,
			wantSubstr: "email is not verified (email_verified is 1)",
		},
	}
	a := is.authenticator(clock)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.Authenticate(context.Background(), "Bearer "+tt.token)
			if tt.wantCode != "" {
				wantError(t, err, tt.wantCode, tt.wantSubstr)
				if strings.Contains(err.Error(), tt.token) {
					t.Fatalf("error %q echoes the token", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if got.Subject != tt.wantID.Subject || !slices.Equal(got.Groups, tt.wantID.Groups) {
				t.Fatalf("got %+v, want %+v", got, tt.wantID)
			}
		})
	}
}

// hmacToken is an HS256 token: a verifier that accepted it could be fooled
// with the public key used as the HMAC secret.
func hmacToken(t *testing.T, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	payload := fmt.Sprintf(`{"iss":%q,"aud":%q,"email":%q,"exp":%d}`, claims["iss"], claims["aud"], claims["email"], claims["exp"])
	jws, err := signer.Sign([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestOIDCClaimAndGroupsClaim(t *testing.T) {
	is := newTestIssuer(t)
	clock := newFakeClock()
	a := is.authenticator(clock, func(c *OIDCConfig) { c.Claim = "sub"; c.GroupsClaim = "roles" })
	c := is.claims(clock.Now())
	c["roles"] = []string{"sre"}
	c["groups"] = []string{"ignored"}
	c["email_verified"] = false // irrelevant when the identity is "sub"
	got, err := a.Authenticate(context.Background(), "bearer "+is.sign(is.key(), c))
	if err != nil {
		t.Fatal(err)
	}
	if got.Subject != "oidc:0a1b2c" || !slices.Equal(got.Groups, []string{"sre"}) {
		t.Fatalf("got %+v, want oidc:0a1b2c in [sre]", got)
	}
}

func TestOIDCRSA(t *testing.T) {
	is := newTestIssuer(t)
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rk := signingKey{kid: "rsa-1", alg: jose.RS256, key: k}
	is.publish(rk)
	clock := newFakeClock()
	got, err := is.authenticator(clock).Authenticate(context.Background(), "Bearer "+is.sign(rk, is.claims(clock.Now())))
	if err != nil {
		t.Fatal(err)
	}
	if got.Subject != "oidc:alice@example.com" {
		t.Fatalf("got %q", got.Subject)
	}
}

// The issuer rotates to a new key: a token naming the new kid makes the
// verifier fetch the JWKS again, at most once per keysRefreshInterval.
func TestOIDCKeyRotation(t *testing.T) {
	is := newTestIssuer(t)
	clock := newFakeClock()
	a := is.authenticator(clock)
	ctx := context.Background()
	old := is.key()

	if _, err := a.Authenticate(ctx, "Bearer "+is.sign(old, is.claims(clock.Now()))); err != nil {
		t.Fatalf("token with the first key: %v", err)
	}
	if n := is.jwksRequests.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times, want 1", n)
	}
	// Cached keys: no refetch for a known kid.
	if _, err := a.Authenticate(ctx, "Bearer "+is.sign(old, is.claims(clock.Now()))); err != nil {
		t.Fatal(err)
	}
	if n := is.jwksRequests.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times for a cached kid, want 1", n)
	}

	rotated := newECKey(t, "k2")
	is.publish(rotated, old)
	tok := is.sign(rotated, is.claims(clock.Now()))

	// Within the refresh interval the new kid cannot be fetched yet.
	_, err := a.Authenticate(ctx, "Bearer "+tok)
	wantError(t, err, manent.EUnauthorized, "OIDC token signature does not verify with the issuer's keys")
	if n := is.jwksRequests.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times within the refresh interval, want 1", n)
	}

	clock.Advance(keysRefreshInterval)
	got, err := a.Authenticate(ctx, "Bearer "+tok)
	if err != nil {
		t.Fatalf("token with the rotated key after the refresh interval: %v", err)
	}
	if got.Subject != "oidc:alice@example.com" {
		t.Fatalf("got %q", got.Subject)
	}
	if n := is.jwksRequests.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times, want 2", n)
	}
	// A random kid cannot make the server fetch again right away.
	_, err = a.Authenticate(ctx, "Bearer "+is.sign(newECKey(t, "attacker"), is.claims(clock.Now())))
	wantError(t, err, manent.EUnauthorized, "OIDC token signature does not verify with the issuer's keys")
	if n := is.jwksRequests.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times after an unknown kid within the interval, want 2", n)
	}
}

// The issuer is down when the first token arrives: discovery fails with
// EUnavailable, is not retried for discoveryRetryInterval, then succeeds.
func TestOIDCIssuerDownAtFirstUse(t *testing.T) {
	is := newTestIssuer(t)
	is.down.Store(true)
	clock := newFakeClock()
	a := is.authenticator(clock)
	ctx := context.Background()
	tok := "Bearer " + is.sign(is.key(), is.claims(clock.Now()))

	_, err := a.Authenticate(ctx, tok)
	wantError(t, err, manent.EUnavailable, "OIDC issuer "+is.srv.URL+" is unavailable")
	if strings.Contains(err.Error(), "maintenance") {
		t.Fatalf("error %q quotes the issuer's response", err)
	}
	is.down.Store(false)

	_, err = a.Authenticate(ctx, tok)
	wantError(t, err, manent.EUnavailable, "is unavailable")
	if n := is.discoveries.Load(); n != 1 {
		t.Fatalf("%d discovery requests within the retry interval, want 1", n)
	}

	clock.Advance(discoveryRetryInterval)
	got, err := a.Authenticate(ctx, tok)
	if err != nil {
		t.Fatalf("after the issuer came back: %v", err)
	}
	if got.Subject != "oidc:alice@example.com" {
		t.Fatalf("got %q", got.Subject)
	}
	// Static tokens never needed the issuer.
	if _, err := a.Authenticate(ctx, "Bearer ci-secret"); err != nil {
		t.Fatal(err)
	}
	if n := is.discoveries.Load(); n != 2 {
		t.Fatalf("%d discovery requests, want 2", n)
	}
}

func TestOIDCIssuerUnreachable(t *testing.T) {
	is := newTestIssuer(t)
	clock := newFakeClock()
	a := is.authenticator(clock)
	tok := "Bearer " + is.sign(is.key(), is.claims(clock.Now()))
	is.srv.Close()
	_, err := a.Authenticate(context.Background(), tok)
	wantError(t, err, manent.EUnavailable, "is unavailable")
}

func TestOIDCDiscoveryIssuerMismatch(t *testing.T) {
	is := newTestIssuer(t)
	is.issuerOverride = "https://impostor.example"
	clock := newFakeClock()
	_, err := is.authenticator(clock).Authenticate(context.Background(), "Bearer "+is.sign(is.key(), is.claims(clock.Now())))
	wantError(t, err, manent.EUnavailable, "is unavailable")
}

// Many first requests at once run discovery once.
func TestOIDCConcurrentFirstUse(t *testing.T) {
	is := newTestIssuer(t)
	clock := newFakeClock()
	a := is.authenticator(clock)
	tok := "Bearer " + is.sign(is.key(), is.claims(clock.Now()))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			_, err := a.Authenticate(context.Background(), tok)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := is.discoveries.Load(); n != 1 {
		t.Fatalf("%d discovery requests, want 1", n)
	}
	if n := is.jwksRequests.Load(); n != 1 {
		t.Fatalf("%d JWKS requests, want 1", n)
	}
}

func TestOIDCConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  OIDCConfig
		want []string // field paths
	}{
		{"ok https", OIDCConfig{Issuer: "https://id.example", Audience: "manent"}, nil},
		{"ok http loopback", OIDCConfig{Issuer: "http://127.0.0.1:5556/dex", Audience: "manent"}, nil},
		{"missing", OIDCConfig{}, []string{"auth.oidc.issuer", "auth.oidc.audience"}},
		{"plain http", OIDCConfig{Issuer: "http://id.example", Audience: "manent"}, []string{"auth.oidc.issuer"}},
		{"not a URL", OIDCConfig{Issuer: "id.example", Audience: "manent"}, []string{"auth.oidc.issuer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			_, err := New(Config{OIDC: &cfg})
			if got := fieldPaths(err); !slices.Equal(got, tt.want) {
				t.Fatalf("got field errors %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}

func fieldPaths(err error) []string {
	var e *manent.Error
	if !errors.As(err, &e) {
		return nil
	}
	var paths []string
	for _, f := range e.Fields {
		paths = append(paths, f.Path)
	}
	return paths
}

func TestOIDCForgedSignature(t *testing.T) {
	is := newTestIssuer(t)
	clock := newFakeClock()
	forger := newECKey(t, is.key().kid)
	_, err := is.authenticator(clock).Authenticate(context.Background(), "Bearer "+is.sign(forger, is.claims(clock.Now())))
	wantError(t, err, manent.EUnauthorized, "OIDC token signature does not verify")
}

func TestOIDCKeysUnavailable(t *testing.T) {
	is := newTestIssuer(t)
	is.keysDown.Store(true)
	clock := newFakeClock()
	a := is.authenticator(clock)
	tok := "Bearer " + is.sign(is.key(), is.claims(clock.Now()))
	_, err := a.Authenticate(context.Background(), tok)
	wantError(t, err, manent.EUnavailable, "cannot fetch the signing keys of OIDC issuer")
	if strings.Contains(err.Error(), "boom") {
		t.Fatalf("error %q quotes the issuer's response", err)
	}
	is.keysDown.Store(false)
	clock.Advance(keysRefreshInterval)
	if _, err := a.Authenticate(context.Background(), tok); err != nil {
		t.Fatalf("after the JWKS came back: %v", err)
	}
}

// An issuer that never sends email_verified can be trusted for its
// addresses with auth.oidc.require_email_verified: false; a token saying
// false is refused all the same.
func TestOIDCRequireEmailVerifiedFalse(t *testing.T) {
	is := newTestIssuer(t)
	clock := newFakeClock()
	no := false
	a := is.authenticator(clock, func(c *OIDCConfig) { c.RequireEmailVerified = &no })
	c := is.claims(clock.Now())
	delete(c, "email_verified")
	got, err := a.Authenticate(context.Background(), "Bearer "+is.sign(is.key(), c))
	if err != nil || got.Subject != "oidc:alice@example.com" {
		t.Fatalf("without email_verified, not required: %+v, %v", got, err)
	}
	c["email_verified"] = false
	_, err = a.Authenticate(context.Background(), "Bearer "+is.sign(is.key(), c))
	wantError(t, err, manent.EUnauthorized, "email is not verified (email_verified is false)")
}
