package web

import "testing"

func TestShowBidi(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain → text — ✓", "plain → text — ✓"},
		{"שלום مرحبا", "שלום مرحبا"},
		{"a\u202eb\u202cc", `a\u202eb\u202cc`},
		{"\u2066\u2067\u2068\u2069", `\u2066\u2067\u2068\u2069`},
		{"1.2\u200f.3\u200e", `1.2\u200f.3\u200e`},
		{"\u061cمرحبا", `\u061cمرحبا`},
		{"<b title=\"\u202a\">", `<b title="\u202a">`},
	} {
		if got := string(showBidi([]byte(tt.in))); got != tt.want {
			t.Errorf("showBidi(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
