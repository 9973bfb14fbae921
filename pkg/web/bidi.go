package web

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/manent-io/manent/descriptor"
)

// Text on the pages comes from steps, plugins, descriptors and people: a
// bidirectional-text control in it (an override U+202A–U+202E, an isolate
// U+2066–U+2069, a mark U+200E, U+200F or U+061C) is invisible and makes
// the browser show the text around it in another order than it is stored
// ("Trojan Source": a log line or a step error that reads otherwise than
// it says). The API refuses them in names, versions and comments; a log
// line or an error keeps them. Every page therefore leaves render with
// each one shown as the CLI shows it, `\u202e`, as text; Hebrew and Arabic
// letters are untouched, and html/template has already escaped the text,
// so the escape lands in a text node or an attribute value, never in
// markup. The control characters a log line may hold (a bell, a backspace,
// a carriage return, DEL, a C1 control) are shown the CLI's way too,
// `\x07`, `\x0d`, `\u0085` (cli/sanitize.go): a browser reads CR as a line
// break and shows the others as nothing or a box. Newline and tab are
// layout; html/template has already made NUL U+FFFD. static/app.js does
// the same to the lines the stream appends.

// showControls returns page with every bidirectional control written as
// \uNNNN, every C0 control but newline and tab, and DEL, as \xNN, and
// every C1 control as \u00NN. It returns page itself when there is none
// (the common case). Each bidirectional control is encoded as 0xE2
// 0x80|0x81 … or 0xD8 0x9C, a C1 control as 0xC2 0x80–0x9F: lead bytes
// that are never inside another character.
func showControls(page []byte) []byte {
	first := -1
	for i := 0; i < len(page) && first < 0; i++ {
		switch c := page[i]; {
		case c < 0x80 && descriptor.HiddenControl(rune(c), true):
			first = i
		case c == 0xe2 || c == 0xd8 || c == 0xc2:
			if r, _ := utf8.DecodeRune(page[i:]); descriptor.HiddenControl(r, true) {
				first = i
			}
		}
	}
	if first < 0 {
		return page
	}
	var b bytes.Buffer
	b.Grow(len(page) + 64)
	b.Write(page[:first])
	for p := page[first:]; len(p) > 0; {
		r, size := utf8.DecodeRune(p)
		switch {
		case r < 0x80 && descriptor.HiddenControl(r, true):
			fmt.Fprintf(&b, `\x%02x`, r)
		case descriptor.HiddenControl(r, true):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.Write(p[:size])
		}
		p = p[size:]
	}
	return b.Bytes()
}
