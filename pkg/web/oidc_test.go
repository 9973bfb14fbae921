package web_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/node"
)

// codeIssuer is a real OIDC issuer on loopback, like the auth tests' one
// (discovery, JWKS, tokens signed with go-jose), with the authorization
// code flow: /authorize signs the user in at once (consent is not what is
// tested) and /token checks the code, the client, the redirect URI and the
// PKCE verifier against the S256 challenge before it issues an ID token.
type codeIssuer struct {
	t   *testing.T
	srv *httptest.Server
	key *ecdsa.PrivateKey

	mu    sync.Mutex
	codes map[string]authRequest
	// seen are the authorization requests, for the test to check.
	seen []url.Values
	// refused says why /token refused the last exchange.
	refused string
	// mutate, when set, changes the claims of the ID tokens /token issues.
	mutate func(map[string]any)
}

type authRequest struct {
	clientID, redirect, challenge, nonce string
}

func newCodeIssuer(t *testing.T, email string, groups []string) *codeIssuer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &codeIssuer{t: t, key: k, codes: map[string]authRequest{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{
			"issuer":                                is.srv.URL,
			"authorization_endpoint":                is.srv.URL + "/authorize",
			"token_endpoint":                        is.srv.URL + "/token",
			"jwks_uri":                              is.srv.URL + "/keys",
			"id_token_signing_alg_values_supported": []string{"ES256"},
			"code_challenge_methods_supported":      []string{"S256"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		is.mu.Lock()
		is.seen = append(is.seen, q)
		is.mu.Unlock()
		if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
			http.Error(w, "authorization code flow with PKCE (S256) required", http.StatusBadRequest)
			return
		}
		code := strings.ReplaceAll(rand.Text(), "=", "")
		is.mu.Lock()
		is.codes[code] = authRequest{clientID: q.Get("client_id"), redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge"), nonce: q.Get("nonce")}
		is.mu.Unlock()
		back, err := url.Parse(q.Get("redirect_uri"))
		if err != nil {
			http.Error(w, "bad redirect_uri", http.StatusBadRequest)
			return
		}
		bq := url.Values{"code": {code}, "state": {q.Get("state")}}
		back.RawQuery = bq.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		f := r.PostForm
		is.mu.Lock()
		req, ok := is.codes[f.Get("code")]
		delete(is.codes, f.Get("code")) // a code is good once
		is.mu.Unlock()
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		refuse := ""
		switch {
		case !ok:
			refuse = "unknown or used code"
		case f.Get("grant_type") != "authorization_code":
			refuse = "grant_type"
		case f.Get("client_id") != req.clientID && !strings.HasPrefix(r.Header.Get("Authorization"), "Basic "):
			refuse = "client_id"
		case f.Get("redirect_uri") != req.redirect:
			refuse = "redirect_uri"
		case base64.RawURLEncoding.EncodeToString(sum[:]) != req.challenge:
			refuse = "PKCE verifier does not match the challenge"
		}
		if refuse != "" {
			is.mu.Lock()
			is.refused = refuse
			is.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant", "error_description": refuse})
			return
		}
		now := time.Now()
		claims := map[string]any{"iss": is.srv.URL, "aud": req.clientID, "sub": "u-1", "email": email,
			"email_verified": true, "groups": groups, "nonce": req.nonce, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		is.mu.Lock()
		if is.mutate != nil {
			is.mutate(claims)
		}
		is.mu.Unlock()
		idt := is.sign(claims)
		writeJSON(w, map[string]any{"access_token": "at-" + rand.Text(), "token_type": "Bearer", "expires_in": 3600, "id_token": idt})
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

func (is *codeIssuer) sign(claims map[string]any) string {
	is.t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: is.key, KeyID: "k1"}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		is.t.Fatal(err)
	}
	raw, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		is.t.Fatal(err)
	}
	return raw
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Sign-in through the issuer: authorization code flow with PKCE (S256),
// state and nonce; the ID token is then authenticated like a bearer token
// and RBAC applies to the identity it names.
func TestOIDCCodeFlowWithPKCE(t *testing.T) {
	is := newCodeIssuer(t, "olga@example.com", []string{"sre"})
	s := startUI(t, func(c *node.Config) {
		c.Auth.OIDC = &auth.OIDCConfig{Issuer: is.srv.URL, Audience: "manent-ui", ClientID: "manent-ui"}
	})
	b := newBrowser(t, s.URL)
	if p := b.get("/login"); !strings.Contains(p.Body, `href="/login/oidc?next=`) {
		t.Fatalf("the sign-in page offers no identity provider:\n%s", p.Body)
	}
	start := b.get("/login/oidc?next=" + url.QueryEscape("/audit"))
	if start.Status != http.StatusFound || !strings.HasPrefix(start.Header.Get("Location"), is.srv.URL+"/authorize?") {
		t.Fatalf("GET /login/oidc: %d %q", start.Status, start.Header.Get("Location"))
	}
	authz, _ := url.Parse(start.Header.Get("Location"))
	q := authz.Query()
	for _, k := range []string{"state", "nonce", "code_challenge"} {
		if len(q.Get(k)) < 16 {
			t.Errorf("authorization request: %s = %q", k, q.Get(k))
		}
	}
	if q.Get("code_challenge_method") != "S256" || q.Get("client_id") != "manent-ui" || q.Get("redirect_uri") != s.URL+"/login/callback" {
		t.Fatalf("authorization request %v", q)
	}

	// The issuer signs the user in and sends the browser back with a code.
	resp, err := b.hc.Get(authz.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(back, s.URL+"/login/callback?") {
		t.Fatalf("issuer answered %d %q", resp.StatusCode, back)
	}
	cb, _ := url.Parse(back)

	// A callback whose state is not the one this browser started: refused.
	forged := cb.Query()
	forged.Set("state", "forged-state-forged-state")
	if p := b.get("/login/callback?" + forged.Encode()); p.Status != http.StatusForbidden {
		t.Fatalf("callback with a forged state: %d, want 403", p.Status)
	}
	// The refusal ended that sign-in: start again.
	start = b.get("/login/oidc?next=" + url.QueryEscape("/audit"))
	resp, err = b.hc.Get(start.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cb, _ = url.Parse(resp.Header.Get("Location"))

	p := b.get("/login/callback?" + cb.RawQuery)
	if p.Status != http.StatusOK || !strings.Contains(p.Body, `href="/audit"`) {
		is.mu.Lock()
		refused := is.refused
		is.mu.Unlock()
		t.Fatalf("callback: %d (issuer refused: %q)\n%s", p.Status, refused, p.Body)
	}
	var cookie *http.Cookie
	for _, c := range (&http.Response{Header: p.Header}).Cookies() {
		if c.Name == "manent_session" && c.Value != "" {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v", cookie)
	}
	// Signed in as the ID token's identity, with its groups' rights.
	a := b.get("/audit")
	if a.Status != 200 || !strings.Contains(a.Body, "oidc:olga@example.com") {
		t.Fatalf("audit page after the OIDC sign-in: %d\n%s", a.Status, a.Body)
	}
	// The code is good once: replaying the callback fails at the issuer.
	if p := b.get("/login/callback?" + cb.RawQuery); p.Status == http.StatusOK {
		t.Fatal("a replayed callback signed in again")
	}
}

// A sign-in started with a `next` too long for the state cookie (the
// cookie would pass the 4096 bytes a browser keeps, and the browser would
// drop it: "the sign-in took too long") still signs in, and lands on the
// home page instead.
func TestOIDCStartWithAHugeNextStillSignsIn(t *testing.T) {
	is := newCodeIssuer(t, "olga@example.com", []string{"sre"})
	s := startUI(t, func(c *node.Config) {
		c.Auth.OIDC = &auth.OIDCConfig{Issuer: is.srv.URL, Audience: "manent-ui", ClientID: "manent-ui"}
	})
	b := newBrowser(t, s.URL)
	next := "/activity?application=" + strings.Repeat("<a>", 1000)
	start := b.get("/login/oidc?next=" + url.QueryEscape(next))
	if start.Status != http.StatusFound {
		t.Fatalf("GET /login/oidc: %d", start.Status)
	}
	for _, c := range (&http.Response{Header: start.Header}).Cookies() {
		if n := len(c.Name) + len(c.Value); strings.HasSuffix(c.Name, "manent_oidc") && n > 4096 {
			t.Fatalf("the sign-in's state cookie is %d bytes: a browser drops it", n)
		}
	}
	resp, err := b.hc.Get(start.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cb, _ := url.Parse(resp.Header.Get("Location"))
	if p := b.get("/login/callback?" + cb.RawQuery); p.Status != http.StatusOK || !strings.Contains(p.Body, `href="/"`) {
		t.Fatalf("callback: %d\n%s", p.Status, p.Body)
	}
}

// An ID token for several audiences is taken only when its azp is our
// client (OIDC Core 3.1.3.7): one issued to another client of the same
// issuer, with ours among its audiences, does not sign in — and the page
// says why. With azp ours it signs in.
func TestOIDCSignInWantsAzpWithSeveralAudiences(t *testing.T) {
	is := newCodeIssuer(t, "olga@example.com", []string{"sre"})
	s := startUI(t, func(c *node.Config) {
		c.Auth.OIDC = &auth.OIDCConfig{Issuer: is.srv.URL, Audience: "manent-ui", ClientID: "manent-ui"}
	})
	signIn := func(mutate func(map[string]any)) page {
		t.Helper()
		is.mu.Lock()
		is.mutate = mutate
		is.mu.Unlock()
		b := newBrowser(t, s.URL)
		start := b.get("/login/oidc?next=" + url.QueryEscape("/audit"))
		resp, err := b.hc.Get(start.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cb, _ := url.Parse(resp.Header.Get("Location"))
		return b.get("/login/callback?" + cb.RawQuery)
	}
	for _, tt := range []struct {
		name   string
		mutate func(map[string]any)
		status int
		want   string
	}{
		{"issued to another client", func(c map[string]any) { c["aud"], c["azp"] = []string{"other-app", "manent-ui"}, "other-app" },
			http.StatusForbidden, `was issued to &#34;other-app&#34; (its azp), not to &#34;manent-ui&#34; (auth.oidc.audience)`},
		{"no azp", func(c map[string]any) { c["aud"] = []string{"other-app", "manent-ui"} },
			http.StatusForbidden, `does not say which it was issued to (no azp claim)`},
		{"azp ours", func(c map[string]any) { c["aud"], c["azp"] = []string{"other-app", "manent-ui"}, "manent-ui" },
			http.StatusOK, `href="/audit"`},
	} {
		if p := signIn(tt.mutate); p.Status != tt.status || !strings.Contains(p.Body, tt.want) {
			t.Errorf("%s: %d, want %d with %q\n%s", tt.name, p.Status, tt.status, tt.want, p.Body)
		}
	}
}
