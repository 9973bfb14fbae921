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
// markup. static/app.js does the same to the lines the stream appends.

// showBidi returns page with every bidirectional control written as
// \uNNNN. It returns page itself when there is none (the common case).
// Each control is encoded as 0xE2 0x80|0x81 … or 0xD8 0x9C, lead bytes
// that are never inside another character.
func showBidi(page []byte) []byte {
	first := -1
	for i := 0; i < len(page); i++ {
		if c := page[i]; c == 0xe2 || c == 0xd8 {
			if r, _ := utf8.DecodeRune(page[i:]); descriptor.BidiControl(r) {
				first = i
				break
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
		if descriptor.BidiControl(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.Write(p[:size])
		}
		p = p[size:]
	}
	return b.Bytes()
}
