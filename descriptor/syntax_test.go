package descriptor

import (
	"strings"
	"testing"
)

// syntaxErrors are YAML syntax errors of many kinds, each with the
// position of its culprit and words of its message. yaml.v3's own text gave
// the line of the enclosing construct, one line early for a parser error,
// and no line at all on the first line. FuzzParse starts from them too.
var syntaxErrors = []struct {
	name      string
	in        string
	line, col int
	want      []string // in the message
}{
	{"unclosed list", syntaxHead + "application: [a\nenvironment: b\n", 2, 14,
		[]string{`the list opened with "[" here is not closed`, "at line 3, column 12", `close it with "]"`}},
	{"unclosed list, CRLF", strings.ReplaceAll(syntaxHead+"application: [a\nenvironment: b\n", "\n", "\r\n"), 2, 14,
		[]string{`the list opened with "[" here is not closed`}},
	{"unclosed mapping", syntaxHead + "application: {a: b\nenvironment: c\n", 2, 14,
		[]string{`the mapping opened with "{" here is not closed`, `close it with "}"`}},
	{"unclosed string", syntaxHead + "application: a\nenvironment: \"b\n", 3, 14,
		[]string{`the string opened with "\"" here is not closed`}},
	{"unclosed single-quoted string", "apiVersion: 'manent/v1\n", 1, 13,
		[]string{`the string opened with "'" here is not closed`}},
	{"list item out of line", syntaxHead + "application: a\nsteps:\n  - name: x\n   plugin: y\n", 5, 4,
		[]string{"did not find expected '-' indicator", "line 5 does not continue the list that starts at line 4, column 3", `items start with "- " at column 3`}},
	{"key out of line, deep", syntaxHead + "application: a\nsteps:\n  - name: x\n    with:\n      a: b\n     c: d\n", 7, 6,
		[]string{"did not find expected key", "line 7 does not continue the mapping that starts at line 4, column 5", `written "key: value" at column 5`}},
	{"list item in a mapping", syntaxHead + "- a\n", 2, 1,
		[]string{"did not find expected key", "the mapping that starts at line 1, column 1"}},
	{"key without its colon", syntaxHead + "application: a\nenvironment\nversion: x\n", 3, 1,
		[]string{"could not find expected ':'", `add ": " after the key`}},
	{"key without its colon at the end, no last line break", syntaxHead + "application: a\nenv", 3, 1,
		[]string{"could not find expected ':'"}},
	{"text ends in a string, no last line break", syntaxHead + "application: 'a", 2, 14,
		[]string{`the string opened with "'" here is not closed (found unexpected end of stream at line 2, column 16)`}},
	{"colon in a value", syntaxHead + "application: a: b\n", 2, 15,
		[]string{`quote the value if it contains ": "`}},
	{"tab indentation", syntaxHead + "\tapplication: a\n", 2, 1,
		[]string{"tab", "indent with spaces"}},
	{"tab on line 1", "\tapiVersion: manent/v1\n", 1, 1,
		[]string{"indent with spaces"}},
	{"reserved character on line 1", "@version: 1\n", 1, 1,
		[]string{"found character that cannot start any token: '@' cannot start a plain value, quote the value (\"@…\")"}},
	{"reserved character", syntaxHead + "application: a\nversion: `x\n", 3, 10,
		[]string{"'`' cannot start a plain value"}},
	{"unknown anchor on line 1", "apiVersion: *v\n", 1, 13,
		[]string{"unknown anchor 'v' referenced", "define the anchor with &name"}},
	{"unknown escape", syntaxHead + "application: \"a\\qb\"\n", 2, 16,
		[]string{"found unknown escape character", `write \\ for a backslash`}},
	{"second document broken", syntaxHead + "application: a\n---\nb: [x\n", 4, 4,
		[]string{`the list opened with "[" here is not closed`}},
	{"text ends in a list", syntaxHead + "application: [\n", 3, 1,
		[]string{`the text ends inside a list or mapping`}},
	{"columns count characters", syntaxHead + "application: a\nversion: ééé: x\n", 3, 13,
		[]string{`quote the value if it contains ": "`}},
}

const syntaxHead = "apiVersion: manent/v1\n"

// TestParseSyntaxErrorPositions checks that a YAML syntax error points at
// the culprit — line and column — and says what to write instead.
func TestParseSyntaxErrorPositions(t *testing.T) {
	for _, tt := range syntaxErrors {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			e := invalidError(t, err)
			if len(e.Fields) != 1 {
				t.Fatalf("got %d field errors %+v, want 1", len(e.Fields), e.Fields)
			}
			f := e.Fields[0]
			if f.Line != tt.line || f.Column != tt.col {
				t.Errorf("got line %d column %d, want %d:%d (%s)", f.Line, f.Column, tt.line, tt.col, f.Message)
			}
			if !strings.HasPrefix(f.Message, "invalid YAML: ") {
				t.Errorf("got %q, want it to start with %q", f.Message, "invalid YAML: ")
			}
			for _, w := range tt.want {
				if !strings.Contains(f.Message, w) {
					t.Errorf("got %q, want it to contain %q", f.Message, w)
				}
			}
		})
	}
}
