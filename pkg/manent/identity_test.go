package manent_test

import (
	"testing"

	"github.com/manent-io/manent/pkg/manent"
)

func TestIdentityMatches(t *testing.T) {
	ci := manent.Identity{Subject: "token:ci", Groups: []string{"deployers"}}
	alice := manent.Identity{Subject: "oidc:alice@example.com", Groups: []string{"sre", "admins"}}
	tests := []struct {
		name     string
		id       manent.Identity
		patterns []string
		want     bool
	}{
		{"empty list matches no one", ci, nil, false},
		{"empty (non-nil) list matches no one", ci, []string{}, false},
		{"star matches everyone", ci, []string{"*"}, true},
		{"exact subject", ci, []string{"token:ci"}, true},
		{"subject glob", alice, []string{"oidc:*@example.com"}, true},
		{"subject glob, other domain", manent.Identity{Subject: "oidc:mallory@example.com.evil"}, []string{"oidc:*@example.com"}, false},
		{"group", alice, []string{"group:sre"}, true},
		{"group glob", alice, []string{"group:adm*"}, true},
		{"group not held", ci, []string{"group:sre"}, false},
		{"a subject named like a group is matched as written", manent.Identity{Subject: "group:sre"}, []string{"group:sre"}, true},
		{"anonymous matches nothing, not even star", manent.Identity{Groups: []string{"sre"}}, []string{"*", "group:sre"}, false},
		{"bad glob never matches", ci, []string{"token:[ci"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.id.Matches(tt.patterns); got != tt.want {
				t.Errorf("%+v.Matches(%q) = %v, want %v", tt.id, tt.patterns, got, tt.want)
			}
		})
	}
}
