package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/server"
)

// jwtIssuer is a real OIDC issuer on loopback: discovery, a JWKS, and
// tokens signed with go-jose.
type jwtIssuer struct {
	t   *testing.T
	url string
	key *ecdsa.PrivateKey
}

func newJWTIssuer(t *testing.T) *jwtIssuer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &jwtIssuer{t: t, key: k}
	mux := http.NewServeMux()
	answer := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		answer(w, map[string]any{"issuer": is.url, "authorization_endpoint": is.url + "/authorize", "token_endpoint": is.url + "/token",
			"jwks_uri": is.url + "/keys", "id_token_signing_alg_values_supported": []string{"ES256"}})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		answer(w, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	is.url = srv.URL
	return is
}

// token signs a token for subject, valid until exp.
func (is *jwtIssuer) token(subject string, exp time.Time) string {
	is.t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: is.key, KeyID: "k1"}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		is.t.Fatal(err)
	}
	now := time.Now()
	raw, err := jwt.Signed(signer).Claims(map[string]any{"iss": is.url, "aud": "manent", "sub": subject,
		"iat": now.Unix(), "exp": exp.Unix()}).Serialize()
	if err != nil {
		is.t.Fatal(err)
	}
	return raw
}

// streamEnd is how a stream ended: the comments it sent and the read error
// that ended it (io.EOF: the server ended the response cleanly).
type streamEnd struct {
	comments []string
	err      error
}

// watchEnd reads s in the background until it ends.
func watchEnd(s *sseStream) <-chan streamEnd {
	out := make(chan streamEnd, 1)
	go func() {
		var e streamEnd
		for {
			f, err := s.next()
			if err != nil {
				e.err = err
				out <- e
				return
			}
			if f.Comment != "" {
				e.comments = append(e.comments, f.Comment)
			}
		}
	}()
	return out
}

// waitEnd waits (bounded) for a watched stream to end and checks it ended
// cleanly with a last comment containing why.
func waitEnd(t *testing.T, what string, ch <-chan streamEnd, why string) {
	t.Helper()
	select {
	case e := <-ch:
		if !errors.Is(e.err, io.EOF) {
			t.Errorf("%s: ended with %v, want a clean end (EOF)", what, e.err)
		}
		if n := len(e.comments); n == 0 || !strings.HasPrefix(e.comments[n-1], "stream ended: ") || !strings.Contains(e.comments[n-1], why) {
			t.Errorf("%s: last comments %q, want \"stream ended: …%s…\"", what, e.comments, why)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still open 30 s after its credential stopped holding", what)
	}
}

// An event stream opened with an OIDC token ends, cleanly and with a last
// comment saying why, once the token has expired — the global stream and
// `logs -f` alike — while a stream opened with a static token goes on.
// (Static tokens change only with the configuration, so with a restart,
// which ends every stream.)
func TestStreamEndsWhenItsTokenExpires(t *testing.T) {
	server.SetStreamRecheck(t, 100*time.Millisecond)
	is := newJWTIssuer(t)
	tokens := []auth.TokenConfig{{Name: "vera", SHA256: auth.HashToken("vera-token")}}
	rules := []auth.RBACRule{{Subjects: []string{"token:vera", "oidc:olga"}, Permissions: []string{"deployment.read"}}}
	srv := newTestServer(t, enginetest.SQLite(t), tokens, rules, func(c *node.Config) {
		c.Auth.OIDC = &auth.OIDCConfig{Issuer: is.url, Audience: "manent", Claim: "sub"}
	})
	admin := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	art := artifactFile(t)
	gate := filepath.Join(t.TempDir(), "gate")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	res, err := admin.Submit(ctx, []byte(gatedDescriptor(art, "staging", gate)), false)
	if err != nil {
		t.Fatal(err)
	}

	// A token that expires in a few seconds opens a global stream and a
	// log stream of the running deploy; vera's static token opens another.
	tok := is.token("olga", time.Now().Add(4*time.Second))
	global := watchEnd(openStream(t, srv.URL+"/api/v1/events", tok, ""))
	logs := watchEnd(openStream(t, srv.URL+"/api/v1/deployments/"+res.ID+"/logs?follow=true", tok, ""))
	vera := openStream(t, srv.URL+"/api/v1/events", "vera-token", "")

	waitEnd(t, "the global stream of an expired token", global, "OIDC token expired")
	waitEnd(t, "logs -f of an expired token", logs, "OIDC token expired")
	if code, _, _ := do(t, "GET", srv.URL+"/api/v1/events", tok, ""); code != http.StatusUnauthorized {
		t.Errorf("reconnecting with the expired token: %d, want 401", code)
	}

	// Vera's stream is checked again and again, and goes on: a new deploy
	// shows on it.
	from := server.StreamRechecks()
	enginetest.Eventually(t, 30*time.Second, func() bool { return server.StreamRechecks() >= from+3 },
		"three more re-checks of the open stream")
	res2, err := admin.Submit(ctx, []byte(gatedDescriptor(art, "prod", gate)), false)
	if err != nil {
		t.Fatal(err)
	}
	vera.until(t, func(f sseFrame) bool { return strings.HasPrefix(f.ID, res2.ID+":") })
}
