package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testIssuer is a real OIDC issuer on an httptest TLS server: it serves the
// discovery document and a JWKS, and signs tokens with go-jose.
type testIssuer struct {
	t   *testing.T
	srv *httptest.Server

	down           atomic.Bool  // discovery answers 503
	keysDown       atomic.Bool  // the JWKS answers 500
	discoveries    atomic.Int32 // discovery requests served (any status)
	jwksRequests   atomic.Int32
	mu             sync.Mutex
	keys           []signingKey // published in the JWKS
	issuerOverride string       // "issuer" in the discovery document, if set
}

type signingKey struct {
	kid string
	alg jose.SignatureAlgorithm
	key crypto.Signer
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	is := &testIssuer{t: t}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		is.discoveries.Add(1)
		if is.down.Load() {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		is.mu.Lock()
		iss := is.issuerOverride
		is.mu.Unlock()
		if iss == "" {
			iss = is.srv.URL
		}
		writeJSON(w, map[string]any{
			"issuer":                                iss,
			"authorization_endpoint":                is.srv.URL + "/authorize",
			"token_endpoint":                        is.srv.URL + "/token",
			"jwks_uri":                              is.srv.URL + "/keys",
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		is.jwksRequests.Add(1)
		if is.keysDown.Load() {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		is.mu.Lock()
		var set jose.JSONWebKeySet
		for _, k := range is.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.key.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
		}
		is.mu.Unlock()
		writeJSON(w, set)
	})
	is.srv = httptest.NewTLSServer(mux)
	t.Cleanup(is.srv.Close)
	is.keys = []signingKey{newECKey(t, "k1")}
	return is
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func newECKey(t *testing.T, kid string) signingKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, alg: jose.ES256, key: k}
}

// publish replaces the JWKS.
func (is *testIssuer) publish(keys ...signingKey) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = keys
}

// key returns the first published key.
func (is *testIssuer) key() signingKey {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.keys[0]
}

// claims are the usual claims of a valid token at now.
func (is *testIssuer) claims(now time.Time) map[string]any {
	return map[string]any{
		"iss":            is.srv.URL,
		"aud":            "manent",
		"sub":            "0a1b2c",
		"email":          "alice@example.com",
		"email_verified": true,
		"iat":            now.Unix(),
		"exp":            now.Add(time.Hour).Unix(),
	}
}

// sign signs claims with k.
func (is *testIssuer) sign(k signingKey, claims map[string]any) string {
	is.t.Helper()
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.key, KeyID: k.kid}},
		(&jose.SignerOptions{}).WithType("JWT"),
	)
	if err != nil {
		is.t.Fatal(err)
	}
	raw, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		is.t.Fatal(err)
	}
	return raw
}

// authenticator returns an Authenticator using the issuer, on clock.
func (is *testIssuer) authenticator(clock *fakeClock, mutate ...func(*OIDCConfig)) *Authenticator {
	is.t.Helper()
	oc := &OIDCConfig{Issuer: is.srv.URL, Audience: "manent"}
	for _, m := range mutate {
		m(oc)
	}
	a, err := New(Config{
		Tokens:     []TokenConfig{{Name: "ci", SHA256: HashToken("ci-secret"), Groups: []string{"deployers"}}},
		OIDC:       oc,
		HTTPClient: is.srv.Client(),
		Now:        clock.Now,
	})
	if err != nil {
		is.t.Fatal(err)
	}
	return a
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Now().Truncate(time.Second)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
