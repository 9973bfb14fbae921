package cli

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/manent-io/manent/descriptor"
)

// Terminal safety (SPEC §11.1 "Text"). Everything the server sends (log
// lines, step errors, messages, names, versions) is someone else's text: a
// step that prints "\x1b]52;c;…" would set the user's clipboard, "\x1b[2J"
// would clear the screen, "\r" would overwrite a line. The CLI never writes
// such a character to its output: sanitize renders each one visibly
// instead ("\x1b", "\r", "\u009b"), and every stream the commands write to
// passes through a terminalWriter that does the same to whatever reaches
// it. Only `manent logs --raw` writes the server's bytes untouched.

// sanitize returns s with every character that could drive a terminal
// rendered as a visible escape: C0 controls and DEL as \xNN (ESC is
// "\x1b"), C1 controls and the invisible bidirectional overrides as \uNNNN,
// and bytes that are not UTF-8 as \xNN. With keepLayout, newline and tab
// are kept (multi-line messages, log text); otherwise they are escaped too.
func sanitize(s string, keepLayout bool) string {
	if isClean(s, keepLayout) {
		return s
	}
	var b bytes.Buffer
	b.Grow(len(s) + 16)
	writeSanitized(&b, []byte(s), keepLayout, false)
	return b.String()
}

// safeText sanitises a single-line field (a name, a state, a reason).
func safeText(s string) string { return sanitize(s, false) }

// safeLines sanitises text that may hold several lines (an error, a log line).
func safeLines(s string) string { return sanitize(s, true) }

// SafeText is s with every control character made visible, for one line of
// text received from elsewhere (for commands built outside this package).
func SafeText(s string) string { return safeText(s) }

// SafeLines is SafeText keeping newlines and tabs.
func SafeLines(s string) string { return safeLines(s) }

// isClean reports whether s has nothing to escape (the common case: no copy).
func isClean(s string, keepLayout bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f {
			if (c == '\n' || c == '\t') && keepLayout {
				continue
			}
			if c >= 0x80 {
				// Multi-byte: decide rune by rune.
				for _, r := range s[i:] {
					if r == utf8.RuneError || dangerous(r, keepLayout) {
						return false
					}
				}
				return true
			}
			return false
		}
	}
	return true
}

// dangerous reports whether r must not reach a terminal as it is: what
// every reader of someone else's text shows escaped
// (descriptor.HiddenControl).
func dangerous(r rune, keepLayout bool) bool { return descriptor.HiddenControl(r, keepLayout) }

// writeSanitized writes p to b with every dangerous character escaped.
// allowSGR lets complete SGR sequences (ESC [ digits;… m, the CLI's own
// colours) through unchanged.
func writeSanitized(b *bytes.Buffer, p []byte, keepLayout, allowSGR bool) {
	for len(p) > 0 {
		c := p[0]
		if c >= 0x20 && c < 0x7f {
			b.WriteByte(c)
			p = p[1:]
			continue
		}
		if c == 0x1b && allowSGR {
			if n := sgrLen(p); n > 0 {
				b.Write(p[:n])
				p = p[n:]
				continue
			}
		}
		r, size := utf8.DecodeRune(p)
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(b, `\x%02x`, c)
		case r < 0x80 && dangerous(r, keepLayout):
			fmt.Fprintf(b, `\x%02x`, c)
		case dangerous(r, keepLayout):
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.Write(p[:size])
		}
		p = p[size:]
	}
}

// sgrLen returns the length of the SGR sequence (ESC [ [0-9;:]* m) at the
// start of p, 0 if p does not start with a complete one.
func sgrLen(p []byte) int {
	if len(p) < 3 || p[0] != 0x1b || p[1] != '[' {
		return 0
	}
	for i := 2; i < len(p) && i < 64; i++ {
		switch c := p[i]; {
		case c == 'm':
			return i + 1
		case (c >= '0' && c <= '9') || c == ';' || c == ':':
		default:
			return 0
		}
	}
	return 0
}

// terminalWriter is the last guard before the CLI's stdout and stderr:
// whatever a command writes, no control character but newline and tab
// gets through, and no escape sequence but the SGR colours the CLI itself
// renders when colour is on. Commands write whole strings (fmt, tables,
// JSON documents), so a character or sequence is never split across writes.
type terminalWriter struct {
	w        io.Writer
	allowSGR bool
}

func (t *terminalWriter) Write(p []byte) (int, error) {
	if isClean(string(p), true) {
		return t.w.Write(p)
	}
	var b bytes.Buffer
	b.Grow(len(p) + 16)
	writeSanitized(&b, p, true, t.allowSGR)
	if _, err := t.w.Write(b.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}
