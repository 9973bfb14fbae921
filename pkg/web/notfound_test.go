package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// An unknown address answers 404 with the site's navigation for a
// signed-in user (not a "Sign in" link they do not need), and never
// repeats the address as a message: a link to the real server cannot make
// it show an attacker's words.
func TestNotFoundPage(t *testing.T) {
	s := startUI(t)
	const lure = "/Your%20session%20expired,%20call%20+1-555-0100"
	tests := []struct {
		name, token string
		want        []string
		not         []string
	}{
		{name: "signed in", token: "alice-token",
			want: []string{`<nav aria-label="Main">`, `href="/environments"`, `href="/audit"`, "token:alice", "There is no page at this address"},
			not:  []string{"555-0100", `href="/login"`}},
		{name: "reader", token: "vera-token",
			want: []string{`<nav aria-label="Main">`, `href="/environments"`, "token:vera"},
			not:  []string{"555-0100", `href="/audit"`}},
		{name: "signed out",
			want: []string{"There is no page at this address", `href="/login"`},
			not:  []string{"555-0100", `<nav aria-label="Main">`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBrowser(t, s.URL)
			if tt.token != "" {
				b.login(tt.token)
			}
			for _, path := range []string{lure, "/deployments/", "/environments/billing"} {
				p := b.get(path)
				if p.Status != http.StatusNotFound {
					t.Fatalf("GET %s: %d, want 404", path, p.Status)
				}
				main := p.Body
				for _, w := range tt.want {
					if !strings.Contains(main, w) {
						t.Errorf("GET %s: no %q in\n%s", path, w, p.Body)
					}
				}
				for _, n := range tt.not {
					if strings.Contains(main, n) {
						t.Errorf("GET %s: %q in\n%s", path, n, p.Body)
					}
				}
			}
		})
	}
}
