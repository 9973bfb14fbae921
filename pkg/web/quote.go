package web

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/manent-io/manent/pkg/manent"
)

// An API error shown as a page (a deploy not found, a name refused) names
// the id or the name the page asked for: text a link chose. It is shown as
// data — clipped, quoted, set apart in <code class="data"> — never as
// words of the server's sentence, so that a crafted link to the real
// server cannot make the page say "deploy x has been rolled back: call …".

// msgPart is a piece of an error page's message: the server's words, or
// (Data) a value the request supplied.
type msgPart struct {
	Text string
	Data bool
}

const (
	// maxShown bounds a supplied value shown on an error page, in bytes.
	maxShown = 64
	// minSupplied: a shorter value cannot say anything; marking it would
	// break up the sentence's own words.
	minSupplied = 3
	// maxSupplied bounds how many values of a request are looked for.
	maxSupplied = 16
)

// supplied returns the values a page's request chose: its path's names
// and ids, then its query's values.
func supplied(r *http.Request) []string {
	var out []string
	add := func(v string) {
		if len(v) >= minSupplied && len(out) < maxSupplied {
			out = append(out, v)
		}
	}
	for _, name := range []string{"id", "application", "environment", "cluster"} {
		add(r.PathValue(name))
	}
	for _, vs := range r.URL.Query() {
		for _, v := range vs {
			add(v)
		}
	}
	return out
}

// asData splits msg into the server's words and the supplied values it
// quotes, in any of the forms the API writes them (as they are, clipped,
// quoted the Go or the JSON way). A value found as it is, unquoted, is
// shown clipped between quotation marks.
func asData(msg string, values []string) []msgPart {
	if len(values) == 0 {
		return []msgPart{{Text: msg}}
	}
	// shown[i] is the text shown for the data that starts at byte i;
	// taken marks the bytes of msg that are data.
	shown := map[int]string{}
	ends := map[int]int{}
	taken := make([]bool, len(msg))
	mark := func(form, show string, bounded bool) {
		if form == "" {
			return
		}
		for from := 0; from+len(form) <= len(msg); {
			i := strings.Index(msg[from:], form)
			if i < 0 {
				return
			}
			i += from
			end := i + len(form)
			from = i + 1
			if bounded && (wordAt(msg, i, true) || wordAt(msg, end, false)) {
				continue
			}
			free := true
			for k := i; k < end; k++ {
				if taken[k] {
					free = false
					break
				}
			}
			if !free {
				continue
			}
			for k := i; k < end; k++ {
				taken[k] = true
			}
			shown[i], ends[i] = show, end
			from = end
		}
	}
	for _, v := range values {
		clipped := manent.ClipText(v, maxShown)
		for _, q := range []string{strconv.Quote(clipped), jsonQuote(clipped), strconv.Quote(v), jsonQuote(v)} {
			mark(q, manent.ClipText(q, maxShown+2), false)
		}
		mark(v, "“"+clipped+"”", true)
		if clipped != v {
			mark(clipped, "“"+clipped+"”", true)
		}
	}
	var out []msgPart
	start := 0
	for i := 0; i < len(msg); {
		if end, ok := ends[i]; ok {
			if start < i {
				out = append(out, msgPart{Text: msg[start:i]})
			}
			out = append(out, msgPart{Text: shown[i], Data: true})
			i, start = end, end
			continue
		}
		i++
	}
	if start < len(msg) {
		out = append(out, msgPart{Text: msg[start:]})
	}
	return out
}

// wordAt reports whether the character just before i (before) or at i
// (!before) is a letter or a digit: a value found there is part of a
// longer word.
func wordAt(s string, i int, before bool) bool {
	var r rune
	switch {
	case before && i > 0:
		r, _ = utf8.DecodeLastRuneInString(s[:i])
	case !before && i < len(s):
		r, _ = utf8.DecodeRuneInString(s[i:])
	default:
		return false
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
