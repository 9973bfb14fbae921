package cli

import (
	"bytes"
	"testing"
)

func TestSanitize(t *testing.T) {
	tests := []struct {
		name, in, text, lines string
	}{
		{"plain", "billing 1.4.2 ünïcode ✓", "billing 1.4.2 ünïcode ✓", "billing 1.4.2 ünïcode ✓"},
		{"osc 52", "\x1b]52;c;aGk=\x07", `\x1b]52;c;aGk=\x07`, `\x1b]52;c;aGk=\x07`},
		{"clear screen", "\x1b[2J\x1b[H", `\x1b[2J\x1b[H`, `\x1b[2J\x1b[H`},
		{"colour", "\x1b[32mSUCCESS\x1b[0m", `\x1b[32mSUCCESS\x1b[0m`, `\x1b[32mSUCCESS\x1b[0m`},
		{"carriage return", "ERROR\rSUCCESS", `ERROR\x0dSUCCESS`, `ERROR\x0dSUCCESS`},
		{"layout", "a\tb\nc", `a\x09b\x0ac`, "a\tb\nc"},
		{"c1 csi", "x\u009b31my", `x\u009b31my`, `x\u009b31my`},
		{"bidi override", "evil\u202etxt.exe", `evil\u202etxt.exe`, `evil\u202etxt.exe`},
		{"bidi embeddings", "\u202a\u202b\u202c\u202d", `\u202a\u202b\u202c\u202d`, `\u202a\u202b\u202c\u202d`},
		{"bidi isolates", "\u2066a\u2067b\u2068c\u2069", `\u2066a\u2067b\u2068c\u2069`, `\u2066a\u2067b\u2068c\u2069`},
		{"bidi marks", "1.2\u200f.3\u200e \u061cx", `1.2\u200f.3\u200e \u061cx`, `1.2\u200f.3\u200e \u061cx`},
		{"hebrew and arabic", "שלום مرحبا 1.2", "שלום مرحبا 1.2", "שלום مرحبا 1.2"},
		{"invalid utf-8", "a\x9b[2Jb\xff", `a\x9b[2Jb\xff`, `a\x9b[2Jb\xff`},
		{"nul and del", "a\x00b\x7f", `a\x00b\x7f`, `a\x00b\x7f`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := safeText(tt.in); got != tt.text {
				t.Errorf("safeText(%q) = %q, want %q", tt.in, got, tt.text)
			}
			if got := safeLines(tt.in); got != tt.lines {
				t.Errorf("safeLines(%q) = %q, want %q", tt.in, got, tt.lines)
			}
		})
	}
}

// The writer in front of stdout/stderr passes the CLI's own colours when
// colour is on, and nothing else.
func TestTerminalWriter(t *testing.T) {
	in := "\x1b[1mbold\x1b[0m \x1b[38;5;2mok\x1b[m \x1b[2J \x1b]0;title\x07 \x1b[31 \x1b\n\ttab\r\u009b"
	for _, tt := range []struct {
		sgr  bool
		want string
	}{
		{true, "\x1b[1mbold\x1b[0m \x1b[38;5;2mok\x1b[m \\x1b[2J \\x1b]0;title\\x07 \\x1b[31 \\x1b\n\ttab\\x0d\\u009b"},
		{false, "\\x1b[1mbold\\x1b[0m \\x1b[38;5;2mok\\x1b[m \\x1b[2J \\x1b]0;title\\x07 \\x1b[31 \\x1b\n\ttab\\x0d\\u009b"},
	} {
		var buf bytes.Buffer
		w := &terminalWriter{w: &buf, allowSGR: tt.sgr}
		n, err := w.Write([]byte(in))
		if err != nil || n != len(in) {
			t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(in))
		}
		if got := buf.String(); got != tt.want {
			t.Errorf("allowSGR=%v:\n got %q\nwant %q", tt.sgr, got, tt.want)
		}
	}
}

func BenchmarkSanitizeClean(b *testing.B) {
	line := "2026-12-04T03:45:58.000Z [deploy] unpacked 1 files into /var/lib/manent/targets/billing/prod"
	for b.Loop() {
		_ = safeLines(line)
	}
}
