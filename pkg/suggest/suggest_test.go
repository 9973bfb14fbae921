package suggest_test

import (
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/suggest"
)

// A close typo gets its candidate (case aside), a far one or a very long
// one none.
func TestClosest(t *testing.T) {
	keys := []string{"artifacts", "timeout", "rules", "environments"}
	for _, tt := range []struct{ in, want string }{
		{"artifact", "artifacts"},
		{"timout", "timeout"},
		{"Rule", "rules"},
		{"envirnoments", "environments"},
		{"x", ""},
		{"completely-different", ""},
		{strings.Repeat("a", 100), ""},
		{strings.Repeat("timeout", 1<<17), ""}, // a hostile 1 MiB name: refused before any distance
	} {
		if got := suggest.Closest(tt.in, keys); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
