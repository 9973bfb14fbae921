package envconfig

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/yamlvalue"
)

// The YAML problems of a configuration file, with the exact texts: the
// descriptor's conversion (pkg/yamlvalue), with the file and line first
// (the descriptor's test reads the same kinds of input). An alias key is
// followed and a merge of a list of mappings through an alias works, as in
// a descriptor (the copy envconfig had refused both).
func TestParseYAMLProblems(t *testing.T) {
	tests := []struct {
		name string
		data string
		want string
	}{
		{"duplicate key", "a: 1\nb: {c: 1, c: 2}\na: 3\n", "prod.yaml:2: /b/c: duplicate field \"c\" (first at line 2); prod.yaml:3: /a: duplicate field \"a\" (first at line 1)"},
		{"alias cycle", "c: &c {a: [*c]}\n", "prod.yaml:1: /c/a/0/a/0: alias *c refers to a value that contains it"},
		{"non-scalar key", "? [a]\n: 1\n? {b: 1}\n: 2\n", "prod.yaml:1: a key must be a plain value, not a list or a mapping; prod.yaml:3: a key must be a plain value, not a list or a mapping"},
		{"alias key", "&k a: 1\n*k : 2\nx: {*k : 3}\n", "prod.yaml:2: /a: duplicate field \"a\" (first at line 1)"},
		{"merge of a scalar", "m: {<<: 1, a: 2}\n", "prod.yaml:1: /m: a merge (<<) takes a mapping or a list of mappings"},
		{"merge of a list by alias", "l: &l [{a: 1}, {b: 2}]\nm: {<<: *l}\n", ""},
		{"merge of a list with a bad scalar", "m: {<<: [!!int x, {a: 1}]}\n", "prod.yaml:1: /m: a merge (<<) takes a mapping or a list of mappings"},
		{"bad scalars", "b: !!bool maybe\ni: !!int abc\nf: !!float abc\ninf: .inf\nnan: .nan\nbig: !!int 1e400\n", "prod.yaml:1: /b: not a valid boolean: \"maybe\"; prod.yaml:2: /i: not a valid integer: \"abc\"; prod.yaml:3: /f: not a valid number: \"abc\"; prod.yaml:4: /inf: must be a finite number, got .inf; prod.yaml:5: /nan: must be a finite number, got .nan; prod.yaml:6: /big: not a valid integer: \"1e400\""},
		{"tags", "v: !vault secret\nbin: !!binary aGk=\nset: !!set {a, b}\nseq: !custom [1]\nts: 2026-12-24\nex: ! x\n", "prod.yaml:1: /v: unsupported YAML tag \"!vault\"; prod.yaml:3: /set: unsupported YAML tag \"!!set\"; prod.yaml:4: /seq: unsupported YAML tag \"!custom\""},
		{"depth 64", "d: " + strings.Repeat("[", 63) + strings.Repeat("]", 63) + "\n", ""},
		{"depth 65", "d: " + strings.Repeat("[", 64) + strings.Repeat("]", 64) + "\n", "prod.yaml:1: /d/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0: nested more than 64 levels deep"},
		{"depth 65 with a value", "d: " + strings.Repeat("[", 64) + "1" + strings.Repeat("]", 64) + "\n", "prod.yaml:1: /d/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0: nested more than 64 levels deep"},
		{"depth 66", "d: " + strings.Repeat("[", 65) + strings.Repeat("]", 65) + "\n", "prod.yaml:1: /d/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0: nested more than 64 levels deep"},
		{"billion laughs", laughs(), "prod.yaml:1: /a4/7/8/8/8/9: more than 100000 values (too many YAML aliases?)"},
		{"errors before a fatal one", "a: !!bool x\na: 2\nc: &c [*c]\n", "prod.yaml:1: /a: not a valid boolean: \"x\"; prod.yaml:2: /a: duplicate field \"a\" (first at line 1); prod.yaml:3: /c/0/0: alias *c refers to a value that contains it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseYAML("prod.yaml", []byte(tt.data))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func laughs() string {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// The value and the line of every value: a key's line for a field, the
// line an alias is written on for its expansion, and the mapping's own
// line for a field it sets itself over a merge.
func TestParseYAMLValueAndLines(t *testing.T) {
	data := "base: &b\n  x: 1\n  y: {deep: 2}\nl: [a, *b]\no:\n  <<: *b\n  y: {own: 3}\n  z: 1.5\n"
	doc, err := parseYAML("prod.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	wantValue := map[string]any{
		"base": map[string]any{"x": 1.0, "y": map[string]any{"deep": 2.0}},
		"l":    []any{"a", map[string]any{"x": 1.0, "y": map[string]any{"deep": 2.0}}},
		"o":    map[string]any{"x": 1.0, "y": map[string]any{"own": 3.0}, "z": 1.5},
	}
	if !reflect.DeepEqual(doc.value, wantValue) {
		t.Errorf("got value %#v\nwant %#v", doc.value, wantValue)
	}
	wantLines := map[string]int{"": 1, "/base": 1, "/base/x": 2, "/base/y": 3, "/base/y/deep": 3, "/l": 4, "/l/0": 4, "/l/1": 4, "/l/1/x": 2, "/l/1/y": 3, "/l/1/y/deep": 3, "/o": 5, "/o/x": 2, "/o/y": 7, "/o/y/deep": 7, "/o/y/own": 7, "/o/z": 8}
	for p, want := range wantLines {
		if got := doc.line(yamlvalue.SplitPointer(p)); got != want {
			t.Errorf("line of %q = %d, want %d", p, got, want)
		}
	}
}
