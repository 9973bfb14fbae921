package web

import (
	"strconv"
	"strings"
)

// Log lines keep the bytes a step wrote (the API and `manent logs --raw`
// give them back as they are). The page renders the common SGR colours
// of those bytes — bold, dim, italic, underline, the 16 foreground and
// background colours — as classes of the stylesheet (the Content Security
// Policy allows no inline style), and drops every other escape sequence
// (cursor moves, screen clears, OSC titles and hyperlinks): it is the
// text that shows, as text (html/template escapes it; the script sets
// textContent). The scan is linear in the line, with no backtracking, and
// a run of sequences that changes nothing makes no element.
// static/app.js holds the same rules for the lines the stream appends.

// logSpan is a run of a log line's text with the classes of its colour
// ("" for plain text).
type logSpan struct {
	Class string
	Text  string
}

// sgr is the rendition in force.
type sgr struct {
	bold, dim, italic, underline bool
	fg, bg                       int // 0: default, else 1 + colour 0–15
}

func (s sgr) class() string {
	var c []string
	if s.bold {
		c = append(c, "ansi-bold")
	}
	if s.dim {
		c = append(c, "ansi-dim")
	}
	if s.italic {
		c = append(c, "ansi-italic")
	}
	if s.underline {
		c = append(c, "ansi-underline")
	}
	if s.fg > 0 {
		c = append(c, "ansi-fg-"+strconv.Itoa(s.fg-1))
	}
	if s.bg > 0 {
		c = append(c, "ansi-bg-"+strconv.Itoa(s.bg-1))
	}
	return strings.Join(c, " ")
}

// apply applies one SGR sequence's parameters (the bytes between "ESC["
// and "m").
func (s *sgr) apply(params string) {
	ps := strings.FieldsFunc(params, func(r rune) bool { return r == ';' || r == ':' })
	if len(ps) == 0 {
		*s = sgr{}
		return
	}
	for i := 0; i < len(ps); i++ {
		n := sgrNumber(ps[i])
		switch {
		case n == 0:
			*s = sgr{}
		case n == 1:
			s.bold = true
		case n == 2:
			s.dim = true
		case n == 3:
			s.italic = true
		case n == 4:
			s.underline = true
		case n == 22:
			s.bold, s.dim = false, false
		case n == 23:
			s.italic = false
		case n == 24:
			s.underline = false
		case n >= 30 && n <= 37:
			s.fg = n - 30 + 1
		case n >= 90 && n <= 97:
			s.fg = n - 90 + 8 + 1
		case n == 39:
			s.fg = 0
		case n >= 40 && n <= 47:
			s.bg = n - 40 + 1
		case n >= 100 && n <= 107:
			s.bg = n - 100 + 8 + 1
		case n == 49:
			s.bg = 0
		case n == 38 || n == 48:
			// 256 colours (5;n) and true colour (2;r;g;b) are not
			// rendered: their parameters are skipped.
			if i+1 < len(ps) && sgrNumber(ps[i+1]) == 5 {
				i += 2
			} else if i+1 < len(ps) && sgrNumber(ps[i+1]) == 2 {
				i += 4
			}
		}
	}
}

// sgrNumber reads a parameter, -1 when it is not a small number.
func sgrNumber(p string) int {
	if len(p) > 3 {
		return -1
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return -1
	}
	return n
}

// ansiSpans splits a log line into runs of text with their colour
// classes, without the escape sequences.
func ansiSpans(line string) []logSpan {
	if !strings.ContainsRune(line, 0x1b) {
		return []logSpan{{Text: line}}
	}
	var out []logSpan
	var text strings.Builder
	var cur sgr
	class := ""
	// want is the class in force for the text that comes next; a run
	// ends when text comes in another class than its own. Past maxSpans
	// runs, the rest of the line stays in the last one's colour (its
	// sequences are still dropped): a hostile line makes no more elements
	// than that.
	want := ""
	write := func(t string) {
		if want != class && len(out) < maxSpans-1 {
			if text.Len() > 0 {
				out = append(out, logSpan{Class: class, Text: text.String()})
				text.Reset()
			}
			class = want
		}
		text.WriteString(t)
	}
	for i := 0; i < len(line); {
		c := line[i]
		if c != 0x1b {
			j := strings.IndexByte(line[i:], 0x1b)
			if j < 0 {
				j = len(line) - i
			}
			write(line[i : i+j])
			i += j
			continue
		}
		i++ // ESC
		if i >= len(line) {
			break
		}
		switch line[i] {
		case '[': // CSI: parameters 0x30–0x3F, intermediates 0x20–0x2F, a final 0x40–0x7E
			i++
			start := i
			for i < len(line) && line[i] >= 0x30 && line[i] <= 0x3f {
				i++
			}
			params := line[start:i]
			for i < len(line) && line[i] >= 0x20 && line[i] <= 0x2f {
				i++
			}
			if i < len(line) && line[i] >= 0x40 && line[i] <= 0x7e {
				if line[i] == 'm' && start+len(params) == i {
					cur.apply(params)
					want = cur.class()
				}
				i++
			}
		case ']', 'P', '_', '^', 'X': // OSC, DCS, APC, PM, SOS: up to BEL or ST (ESC \)
			i++
			for i < len(line) {
				if line[i] == 0x07 {
					i++
					break
				}
				if line[i] == 0x1b && i+1 < len(line) && line[i+1] == '\\' {
					i += 2
					break
				}
				i++
			}
		default: // a two-character escape (ESC c, ESC 7, ESC ( B …)
			if line[i] >= 0x20 && line[i] <= 0x2f && i+1 < len(line) {
				i++
			}
			i++
		}
	}
	if text.Len() > 0 {
		out = append(out, logSpan{Class: class, Text: text.String()})
	}
	return out
}

// maxSpans bounds the coloured runs of one log line.
const maxSpans = 256
