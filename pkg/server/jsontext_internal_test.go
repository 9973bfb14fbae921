package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// jsonTextLen is what a log line's text weighs in an answer, to bound a
// page of GET …/logs: exactly what encoding/json writes for it, quotes
// aside — including what it writes for U+2028/U+2029 (\u2028, six bytes)
// and for a byte that is not UTF-8 (U+FFFD, three), which an estimate
// under-counted, letting a page of them reach twice its bound.
func TestJSONTextLenIsExact(t *testing.T) {
	for _, s := range []string{
		"", "plain text", "tab\tnew\nline", "\x00\x01\x1f", `"quoted" \ back`, "<b>&amp;</b>",
		"\u2028\u2029", "é ü 日本 🚀", "\xff\xfe bad \xc3", "\xe2\x80", "\xe2\x80\xa8x", strings.Repeat("\u2028", 1000),
		"\x7f", "\u00a0\u200b",
	} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := jsonTextLen(s), len(b)-2; got != want {
			t.Errorf("jsonTextLen(%q) = %d, json.Marshal writes %d", s, got, want)
		}
	}
}
