package yamlvalue

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Syntax is a YAML syntax error explained: where the culprit is and what
// to write instead.
type Syntax struct {
	// Line and Column are where the culprit is, from 1 (a column counts
	// characters, as yaml.Node's do); 0 when not known.
	Line, Column int
	// Message says what is wrong, without "invalid YAML" or a position of
	// its own: "the list opened with \"[\" is not closed …".
	Message string
}

// ExplainSyntax explains err, an error of parsing data with yaml.v3
// (Unmarshal or Decoder.Decode). yaml.v3's own text gives the line of the
// enclosing construct, one line early for a parser error, and no line at
// all on the first line; its *yaml.SyntaxError (third_party/yaml.v3,
// PATCHES.md) says where the parser stopped and which construct it was in.
// The position is that of the culprit: the opening bracket or quote of a
// list, mapping or string that is not closed, else where the parser
// stopped. An error without positions keeps yaml.v3's text.
func ExplainSyntax(data []byte, err error) Syntax {
	var se *yaml.SyntaxError
	if !errors.As(err, &se) || se.Line == 0 {
		return Syntax{Message: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	line, col := se.Line, se.Column
	if offset(data, line, col) >= len(data) {
		// yaml.v3 ends the text with a line break of its own: a problem
		// found at the end of a last line without one is put after it.
		line, col = end(data)
	}
	at := func(line, col int) string { return fmt.Sprintf("line %d, column %d", line, col) }
	opened := func(what, by string) Syntax {
		return Syntax{Line: se.ContextLine, Column: se.ContextColumn, Message: fmt.Sprintf(
			"the %s opened with %q here is not closed (%s at %s): close it with %q, or quote the whole value if %q is part of the text",
			what, by, se.Problem, at(line, col), closer(by), by)}
	}
	s := Syntax{Line: line, Column: col, Message: se.Problem}
	found := runeAt(data, line, col)
	switch {
	case se.Context == "while parsing a flow sequence" && se.ContextLine > 0:
		return opened("list", "[")
	case se.Context == "while parsing a flow mapping" && se.ContextLine > 0:
		return opened("mapping", "{")
	case se.Context == "while scanning a quoted scalar" && se.Problem == "found unexpected end of stream" && se.ContextLine > 0:
		q := runeAt(data, se.ContextLine, se.ContextColumn)
		if q != '"' && q != '\'' {
			q = '"'
		}
		return opened("string", string(q))
	case se.Problem == "did not find expected node content" && offset(data, line, col) >= len(bytes.TrimRight(data, " \t\r\n")):
		s.Message += `: the text ends inside a list or mapping — close each "[" with "]" and each "{" with "}", or quote a value that starts with one`
	case se.Problem == "could not find expected ':'" && se.ContextLine > 0:
		s.Line, s.Column = se.ContextLine, se.ContextColumn
		s.Message += `: this line is neither "key: value" nor a list item "- value" — add ": " after the key, or indent the line more to continue the value above`
	case strings.Contains(se.Problem, "tab character") || found == '\t':
		s.Message += ": indent with spaces, YAML does not allow tabs there"
	case se.Problem == "found character that cannot start any token" && found != 0:
		s.Message += fmt.Sprintf(": %q cannot start a plain value, quote the value (\"%c…\")", found, found)
	case se.Problem == "mapping values are not allowed in this context":
		s.Message += `: ": " here starts a key where none may start — quote the value if it contains ": ", or indent this line like the other keys of its mapping`
	case (se.Problem == "did not find expected key" || se.Problem == "did not find expected '-' indicator") && se.ContextLine > 0:
		what, how, into := "mapping", "its keys are written \"key: value\"", "a value"
		if se.Context == "while parsing a block collection" {
			what, how, into = "list", "its items start with \"- \"", "an item"
		}
		s.Message = fmt.Sprintf("%s: line %d does not continue the %s that starts at %s — %s at column %d; indent this line more to put it inside %s",
			se.Problem, line, what, at(se.ContextLine, se.ContextColumn), how, se.ContextColumn, into)
	case strings.HasPrefix(se.Problem, "unknown anchor"):
		s.Message += ": define the anchor with &name on a value before this *name, or quote the value if \"*\" is part of the text"
	case se.Problem == "found unknown escape character":
		s.Message += `: in double quotes a backslash starts an escape; write \\ for a backslash, or use single quotes`
	default:
		if se.Context != "" && se.ContextLine > 0 && (se.ContextLine != line || se.ContextColumn != col) {
			s.Message += fmt.Sprintf(" (%s at %s)", se.Context, at(se.ContextLine, se.ContextColumn))
		}
	}
	return s
}

// end is the line and column just after the last character of data.
func end(data []byte) (line, col int) {
	line, col = 1, 1
	for i := 0; i < len(data); {
		i, line, col, _ = advance(data, i, line, col)
	}
	return line, col
}

// advance steps over the character of data at byte i, at line and col
// (from 1), as yaml.v3 counts them: "\r\n" and a lone "\r" are one line
// break each. brk says whether it was a line break.
func advance(data []byte, i, line, col int) (next, nextLine, nextCol int, brk bool) {
	r, size := utf8.DecodeRune(data[i:])
	i += size
	switch {
	case r == '\r' && i < len(data) && data[i] == '\n':
		i++
		fallthrough
	case r == '\n' || r == '\r':
		return i, line + 1, 1, true
	}
	return i, line, col + 1, false
}

// closer is the character that closes an opening bracket or quote.
func closer(open string) string {
	switch open {
	case "[":
		return "]"
	case "{":
		return "}"
	}
	return open
}

// runeAt returns the character at a line and column of data (from 1, a
// column counting characters), or 0 at a line break or past the end.
func runeAt(data []byte, line, col int) rune {
	i := offset(data, line, col)
	if i >= len(data) {
		return 0
	}
	r, _ := utf8.DecodeRune(data[i:])
	if r == '\r' || r == '\n' {
		return 0
	}
	return r
}

// offset returns the byte offset of a line and column of data (from 1, a
// column counting characters, as advance counts them), or len(data) past
// its end.
func offset(data []byte, line, col int) int {
	l, c := 1, 1
	for i := 0; i < len(data); {
		if l == line && c == col {
			return i
		}
		next, nl, nc, brk := advance(data, i, l, c)
		if brk && l == line {
			return next - 1 // past the end of the line: its break
		}
		i, l, c = next, nl, nc
	}
	return len(data)
}
