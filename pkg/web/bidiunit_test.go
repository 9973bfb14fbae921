package web

import "testing"

func TestShowControls(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain → text — ✓", "plain → text — ✓"},
		{"שלום مرحبا", "שלום مرحبا"},
		{"a\u202eb\u202cc", `a\u202eb\u202cc`},
		{"\u2066\u2067\u2068\u2069", `\u2066\u2067\u2068\u2069`},
		{"1.2\u200f.3\u200e", `1.2\u200f.3\u200e`},
		{"\u061cمرحبا", `\u061cمرحبا`},
		{"<b title=\"\u202a\">", `<b title="\u202a">`},
		// Control characters show as the CLI shows them; newline and tab
		// are layout.
		{"a\x01b\x08c\rd\x1be\x7ff", `a\x01b\x08c\x0dd\x1be\x7ff`},
		{"line\tcol\nnext", "line\tcol\nnext"},
		{"c1\u0085\u009bx é", `c1\u0085\u009bx é`},
	} {
		if got := string(showControls([]byte(tt.in))); got != tt.want {
			t.Errorf("showControls(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
