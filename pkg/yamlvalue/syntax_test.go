package yamlvalue

import (
	"errors"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestExplainSyntax(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		line, col int
		want      string
	}{
		// yaml.v3's text: "yaml: line 1: did not find expected ',' or ']'".
		{"unclosed list", "a:\n  b: [1\n", 2, 6,
			`the list opened with "[" here is not closed (did not find expected ',' or ']' at line 3, column 1): close it with "]", or quote the whole value if "[" is part of the text`},
		// The end of a last line without a break, not the line after it.
		{"at the end without a last line break", "a: [1", 1, 4,
			`the list opened with "[" here is not closed (did not find expected ',' or ']' at line 1, column 6): close it with "]", or quote the whole value if "[" is part of the text`},
		{"lone CR line breaks", "a: b\rc: [\"x\r", 2, 5,
			`the string opened with "\"" here is not closed (found unexpected end of stream at line 3, column 1): close it with "\"", or quote the whole value if "\"" is part of the text`},
		// Columns count characters, as yaml.Node's do.
		{"after multi-byte characters", "é: ü: x\n", 1, 5,
			`mapping values are not allowed in this context: ": " here starts a key where none may start — quote the value if it contains ": ", or indent this line like the other keys of its mapping`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n yaml.Node
			err := yaml.Unmarshal([]byte(tt.in), &n)
			if err == nil {
				t.Fatal("parsed, want a syntax error")
			}
			got := ExplainSyntax([]byte(tt.in), err)
			if got.Line != tt.line || got.Column != tt.col || got.Message != tt.want {
				t.Errorf("got %d:%d %q\nwant %d:%d %q", got.Line, got.Column, got.Message, tt.line, tt.col, tt.want)
			}
		})
	}
	// An error that does not say where keeps yaml.v3's text, without a position.
	got := ExplainSyntax(nil, errors.New("yaml: something odd"))
	if got != (Syntax{Message: "something odd"}) {
		t.Errorf("got %+v, want the text alone", got)
	}
}
