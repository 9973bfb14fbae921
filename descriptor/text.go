package descriptor

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// freeForm says whether the value at path is free-form configuration (the
// parameters, a plugin's `with`), whose text may span lines. Every other
// text of a descriptor is a single line.
func freeForm(path []string) bool {
	switch len(path) {
	case 1:
		return path[0] == "parameters"
	case 2:
		return path[0] == "target" && path[1] == "with"
	case 3:
		return path[0] == "steps" && path[2] == "with"
	}
	return false
}

// checkText refuses control characters (and line and bidirectional-text
// controls) in every single-line text field and field name, so that no
// terminal, log or web page showing them can be tricked (SPEC §11.1).
// Inside the free-form maps (parameters, target.with, steps[].with) the
// values are free text, which may span lines; their field names, at any
// depth, are names like any other — a parameter named "replicas" followed
// by a right-to-left override read as another one in `manent validate`,
// the web page and a reviewer's diff.
func (c *checker) checkText(doc map[string]any) {
	path := make([]string, 0, maxDepth)
	free := 0 // > 0 inside a free-form map: only names are checked
	var walk func(v any)
	walk = func(v any) {
		if c.full() {
			return
		}
		if freeForm(path) {
			free++
			defer func() { free-- }()
		}
		switch v := v.(type) {
		case string:
			if free > 0 {
				return
			}
			if r, at, bad := firstControl(v); bad && !c.reported[pointer(path)] {
				c.add(path, "%s must be a single line of plain text: it contains %s at character %d", fieldName(path), describeRune(r), at)
			}
		case map[string]any:
			keys := c.keysInOrder(path, v)
			for _, k := range keys {
				path = append(path, k)
				if r, at, bad := firstControl(k); bad && !c.reported[pointer(path)] {
					c.addAtKey(path, "the field name %q must be plain text: it contains %s at character %d", clip(k), describeRune(r), at)
				} else {
					walk(v[k])
				}
				path = path[:len(path)-1]
			}
		case []any:
			for i, x := range v {
				path = append(path, strconv.Itoa(i))
				walk(x)
				path = path[:len(path)-1]
			}
		}
	}
	walk(doc)
}

// keysInOrder returns the keys of the mapping at path in the order of the
// input, so that the errors reported first are the first ones.
func (c *checker) keysInOrder(path []string, m map[string]any) []string {
	type key struct {
		name      string
		line, col int
	}
	keys := make([]key, 0, len(m))
	_, node := c.tree.locate(path)
	for name := range m {
		k := key{name: name}
		if kn, _ := c.tree.Field(node, name); kn != nil {
			k.line, k.col = kn.Line, kn.Column
		}
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.line != b.line {
			return a.line < b.line
		}
		if a.col != b.col {
			return a.col < b.col
		}
		return a.name < b.name
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.name
	}
	return out
}

// FirstControl returns the first rune of s a single line of text must not
// hold (a control character, a line break, a bidirectional-text control
// or mark),
// its position (from 1, in characters) and a description of it for a
// message ("an escape (U+001B)").
func FirstControl(s string) (r rune, at int, what string, found bool) {
	r, at, found = firstControl(s)
	if found {
		what = describeRune(r)
	}
	return r, at, what, found
}

// firstControl returns the first rune of s a single line of text must not
// hold, and its position (from 1, in characters).
func firstControl(s string) (rune, int, bool) {
	i := 0
	for _, r := range s {
		i++
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || BidiControl(r) {
			return r, i, true
		}
	}
	return 0, 0, false
}

// BidiControl reports whether r is one of the invisible characters that
// reorder the text around them: the embeddings and overrides
// (U+202A–U+202E), the isolates (U+2066–U+2069) and the marks (LRM U+200E,
// RLM U+200F, ALM U+061C; "1.2" RLM ".3" reads "1.23." in a left-to-right
// line). Hebrew and Arabic letters are not: they are text.
func BidiControl(r rune) bool {
	return (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069') ||
		r == '\u200e' || r == '\u200f' || r == '\u061c'
}

// HiddenControl reports whether r is shown as an escape wherever manent
// shows someone else's text (the CLI's output, the web page's log lines
// and errors): a C0 control or DEL — but newline and tab with keepLayout —,
// a C1 control, or a bidirectional control (BidiControl). Each drives a
// terminal, shows as nothing or reorders the text around it.
func HiddenControl(r rune, keepLayout bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return !keepLayout
	case r < 0x20 || r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f: // C1 controls: 0x9b is CSI on some terminals
		return true
	}
	return BidiControl(r)
}

// EscapeControls writes the runes FirstControl refuses as \uXXXX, so that
// a path naming a hostile field, or a quoted value, can be shown safely.
func EscapeControls(s string) string {
	var b strings.Builder
	for _, r := range s {
		if _, _, bad := firstControl(string(r)); bad {
			fmt.Fprintf(&b, "\\u%04X", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func describeRune(r rune) string {
	switch {
	case r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029' || r == '\u0085':
		return fmt.Sprintf("a line break (U+%04X)", r)
	case r == '\t':
		return "a tab (U+0009)"
	case r == 0x1b:
		return "an escape character (U+001B, terminal escape sequences)"
	case r == '\u200e' || r == '\u200f' || r == '\u061c':
		return fmt.Sprintf("the bidirectional-text mark U+%04X", r)
	case BidiControl(r):
		return fmt.Sprintf("the bidirectional-text control U+%04X", r)
	}
	return fmt.Sprintf("the control character U+%04X", r)
}

// fieldName writes a path as a person names the field: steps[2].name.
func fieldName(path []string) string {
	var b strings.Builder
	for i, t := range path {
		if _, err := strconv.Atoi(t); err == nil && i > 0 {
			b.WriteString("[" + t + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(clip(t))
	}
	return b.String()
}
