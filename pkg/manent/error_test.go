package manent_test

import (
	"testing"

	"github.com/manent-io/manent/pkg/manent"
)

// A count in a message takes the noun's singular or plural, never "(s)".
func TestPlural(t *testing.T) {
	tests := []struct {
		n    int
		noun string
		want string
	}{
		{0, "deploy", "0 deploys"},
		{1, "deploy", "1 deploy"},
		{2, "approval", "2 approvals"},
		{-1, "row", "-1 rows"},
	}
	for _, tt := range tests {
		if got := manent.Plural(tt.n, tt.noun); got != tt.want {
			t.Errorf("Plural(%d, %q) = %q, want %q", tt.n, tt.noun, got, tt.want)
		}
	}
}
