package auth

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/manent"
)

func TestHashToken(t *testing.T) {
	// sha256("abc"), FIPS 180-2 test vector.
	if got, want := HashToken("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Fatalf("HashToken(abc) = %s, want %s", got, want)
	}
}

func TestNewToken(t *testing.T) {
	a, b := NewToken(), NewToken()
	if a == b || !strings.HasPrefix(a, "mnt_") || len(a) < 20 {
		t.Fatalf("NewToken gave %q and %q", a, b)
	}
}

func TestStaticTokens(t *testing.T) {
	a, err := New(Config{
		Tokens: []TokenConfig{
			{Name: "ci", SHA256: HashToken("ci-secret"), Groups: []string{"deployers"}},
			{Name: "agent-eu", SHA256: strings.ToUpper(HashToken("agent-secret"))},
			{Name: "reader", SHA256: HashToken("reader-secret"), Groups: []string{"readers", "audit"}},
		},
		BootstrapToken: "bootstrap-secret",
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		header     string
		want       manent.Identity
		wantSubstr string // an EUnauthorized message
	}{
		{name: "first entry", header: "Bearer ci-secret", want: manent.Identity{Subject: "token:ci", Groups: []string{"deployers"}}},
		{name: "upper-case hash in config", header: "Bearer agent-secret", want: manent.Identity{Subject: "token:agent-eu"}},
		{name: "last entry", header: "Bearer reader-secret", want: manent.Identity{Subject: "token:reader", Groups: []string{"readers", "audit"}}},
		{name: "bootstrap", header: "Bearer bootstrap-secret", want: manent.Identity{Subject: BootstrapSubject, Groups: []string{"admins"}}},
		{name: "scheme is case-insensitive", header: "bearer   ci-secret ", want: manent.Identity{Subject: "token:ci", Groups: []string{"deployers"}}},
		{name: "wrong token", header: "Bearer ci-secreT", wantSubstr: "unknown token"},
		{name: "the stored hash is not the token", header: "Bearer " + HashToken("ci-secret"), wantSubstr: "unknown token"},
		{name: "JWT-shaped without OIDC", header: "Bearer aaa.bbb.ccc", wantSubstr: "OIDC is not configured"},
		{name: "missing header", header: "", wantSubstr: "authentication required"},
		{name: "basic scheme", header: "Basic Y2k6Y2ktc2VjcmV0", wantSubstr: "must use the Bearer scheme"},
		{name: "bare token", header: "ci-secret", wantSubstr: "must use the Bearer scheme"},
		{name: "empty token", header: "Bearer ", wantSubstr: "the bearer token is empty"},
		{name: "unknown token after spaces", header: "Bearer    x", wantSubstr: "unknown token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.Authenticate(context.Background(), tt.header)
			if tt.wantSubstr != "" {
				wantError(t, err, manent.EUnauthorized, tt.wantSubstr)
				if _, tok, _ := strings.Cut(tt.header, " "); strings.TrimSpace(tok) != "" && strings.Contains(err.Error(), strings.TrimSpace(tok)) {
					t.Fatalf("error %q echoes the token", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if got.Subject != tt.want.Subject || !slices.Equal(got.Groups, tt.want.Groups) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Authenticate hands out copies: changing an identity's groups does not
// change the configured token.
func TestStaticTokenGroupsAreCopied(t *testing.T) {
	a, err := New(Config{Tokens: []TokenConfig{{Name: "ci", SHA256: HashToken("s"), Groups: []string{"deployers"}}}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := a.Authenticate(context.Background(), "Bearer s")
	id.Groups[0] = "admins"
	id, _ = a.Authenticate(context.Background(), "Bearer s")
	if id.Groups[0] != "deployers" {
		t.Fatalf("groups changed to %v", id.Groups)
	}
}

func TestLookupTokenComparesEveryEntry(t *testing.T) {
	var tokens []staticToken
	for _, n := range []string{"a", "b", "c"} {
		tok, _ := parseTokens([]TokenConfig{{Name: n, SHA256: HashToken(n + "-secret")}}, "")
		tokens = append(tokens, tok...)
	}
	for _, n := range []string{"a", "b", "c"} {
		got, ok := lookupToken(tokens, n+"-secret")
		if !ok || got.name != n {
			t.Fatalf("lookupToken(%s-secret) = %q, %v", n, got.name, ok)
		}
	}
	if _, ok := lookupToken(tokens, "d-secret"); ok {
		t.Fatal("unknown token found")
	}
	if _, ok := lookupToken(nil, ""); ok {
		t.Fatal("empty token found in an empty set")
	}
}

func TestTokenConfigValidation(t *testing.T) {
	h := HashToken("x")
	tests := []struct {
		name      string
		tokens    []TokenConfig
		bootstrap string
		want      []string
	}{
		{"ok", []TokenConfig{{Name: "ci", SHA256: h}}, "", nil},
		{"plain token instead of hash", []TokenConfig{{Name: "ci", SHA256: "my-secret-token"}}, "", []string{"auth.tokens[0].sha256"}},
		{"short hash", []TokenConfig{{Name: "ci", SHA256: h[:62]}}, "", []string{"auth.tokens[0].sha256"}},
		{"no name", []TokenConfig{{SHA256: h}}, "", []string{"auth.tokens[0].name"}},
		{"name with a space", []TokenConfig{{Name: "c i", SHA256: h}}, "", []string{"auth.tokens[0].name"}},
		{"duplicate name", []TokenConfig{{Name: "ci", SHA256: h}, {Name: "ci", SHA256: HashToken("y")}}, "", []string{"auth.tokens[1].name"}},
		{"duplicate hash", []TokenConfig{{Name: "ci", SHA256: h}, {Name: "cd", SHA256: h}}, "", []string{"auth.tokens[1].sha256"}},
		{"admin reserved with bootstrap", []TokenConfig{{Name: "admin", SHA256: h}}, "boot", []string{"auth.tokens[0].name"}},
		{"admin free without bootstrap", []TokenConfig{{Name: "admin", SHA256: h}}, "", nil},
		{"bootstrap equals a token", []TokenConfig{{Name: "ci", SHA256: h}}, "x", []string{"auth.tokens[0].sha256"}},
		{"empty group", []TokenConfig{{Name: "ci", SHA256: h, Groups: []string{""}}}, "", []string{"auth.tokens[0].groups[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{Tokens: tt.tokens, BootstrapToken: tt.bootstrap})
			if got := fieldPaths(err); !slices.Equal(got, tt.want) {
				t.Fatalf("got field errors %v (%v), want %v", got, err, tt.want)
			}
			if err != nil && manent.ErrorCode(err) != manent.EInvalid {
				t.Fatalf("got code %s, want invalid", manent.ErrorCode(err))
			}
		})
	}
}
