package descriptor

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// yamlProblemCases are YAML mappings that the conversion to a generic value
// refuses; envconfig's test reads the same kinds of input. Each body is put
// under "parameters:" (a free mapping) of a valid descriptor.
func TestParseYAMLProblems(t *testing.T) {
	tests := []struct {
		name string
		body string // lines of the parameters mapping, indented by two spaces
		want []string
	}{
		{"duplicate key", "  a: 1\n  b: {c: 1, c: 2}\n  a: 3\n", []string{"8:13 /parameters/b/c: duplicate field \"c\" (first at line 8)", "9:3 /parameters/a: duplicate field \"a\" (first at line 7)"}},
		{"alias cycle", "  c: &c {a: [*c]}\n", []string{"7:14 /parameters/c/a/0/a/0: alias *c refers to a value that contains it"}},
		{"non-scalar key", "  ? [a]\n  : 1\n  ? {b: 1}\n  : 2\n", []string{"7:5 /parameters: a key must be a plain value, not a list or a mapping", "9:5 /parameters: a key must be a plain value, not a list or a mapping"}},
		{"alias key", "  &k a: 1\n  *k : 2\n  x: {*k : 3}\n", []string{"8:3 /parameters/a: duplicate field \"a\" (first at line 7)"}},
		{"merge of a scalar", "  m: {<<: 1, a: 2}\n", []string{"7:11 /parameters/m: a merge (<<) takes a mapping or a list of mappings"}},
		{"merge of a list by alias", "  l: &l [{a: 1}, {b: 2}]\n  m: {<<: *l}\n", nil},
		{"merge of a list with a bad scalar", "  m: {<<: [!!int x, {a: 1}]}\n", []string{"7:12 /parameters/m: a merge (<<) takes a mapping or a list of mappings"}},
		{"bad scalars", "  b: !!bool maybe\n  i: !!int abc\n  f: !!float abc\n  inf: .inf\n  nan: .nan\n  big: !!int 1e400\n", []string{"7:6 /parameters/b: not a valid boolean: \"maybe\"", "8:6 /parameters/i: not a valid integer: \"abc\"", "9:6 /parameters/f: not a valid number: \"abc\"", "10:8 /parameters/inf: must be a finite number, got .inf", "11:8 /parameters/nan: must be a finite number, got .nan", "12:8 /parameters/big: not a valid integer: \"1e400\""}},
		{"tags", "  v: !vault secret\n  bin: !!binary aGk=\n  set: !!set {a, b}\n  seq: !custom [1]\n  ts: 2026-12-24\n  ex: ! x\n", []string{"7:6 /parameters/v: unsupported YAML tag \"!vault\"", "9:8 /parameters/set: unsupported YAML tag \"!!set\"", "10:8 /parameters/seq: unsupported YAML tag \"!custom\""}},
		{"depth 64", "  d: " + strings.Repeat("[", 62) + strings.Repeat("]", 62) + "\n", nil},
		{"depth 65", "  d: " + strings.Repeat("[", 63) + strings.Repeat("]", 63) + "\n", []string{"7:68 /parameters/d/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0: nested more than 64 levels deep"}},
		{"depth 65 with a value", "  d: " + strings.Repeat("[", 63) + "1" + strings.Repeat("]", 63) + "\n", []string{"7:68 /parameters/d/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0: nested more than 64 levels deep"}},
		{"depth 66", "  d: " + strings.Repeat("[", 64) + strings.Repeat("]", 64) + "\n", []string{"7:68 /parameters/d/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0: nested more than 64 levels deep"}},
		{"billion laughs", laughs("  "), []string{"7:18 /parameters/a4/7/8/8/8/2: the descriptor expands to more than 100000 values (too many YAML aliases?)"}},
		{"errors before a fatal one", "  a: !!bool x\n  a: 2\n  c: &c [*c]\n", []string{"9:10 /parameters/c/0/0: alias *c refers to a value that contains it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(valid + "parameters:\n" + tt.body))
			var got []string
			if err != nil {
				for _, f := range invalidError(t, err).Fields {
					got = append(got, fmt.Sprintf("%d:%d %s: %s", f.Line, f.Column, f.Path, f.Message))
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%#v\nwant\n%#v", got, tt.want)
			}
		})
	}
}

// laughs is a billion-laughs mapping, each line indented by indent.
func laughs(indent string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%sa0: &a0 [x, x, x, x, x, x, x, x, x, x]\n", indent)
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&b, "%sa%d: &a%d [", indent, i, i)
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

// The value the conversion gives: numbers as written (json.Number), merges
// with explicit keys first then earlier merges, a list of mappings merged
// through an alias, dates and binary as text.
func TestConvertValue(t *testing.T) {
	in := "base: &b {x: 1, y: 2}\nmore: &m {y: 3, z: 4}\nlist: &l [*m, {w: 5}]\n" +
		"o: {<<: [*b, *m], x: 0}\np: {<<: *l}\nn: [9007199254740992, 1.50, -0x10, 1e3, ~, true, 2026-12-24, !!binary aGk=]\n"
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(in), &doc); err != nil {
		t.Fatal(err)
	}
	errs := &errorList{}
	got, bad, fatal := convert(doc.Content[0], errs)
	if fatal != nil || len(errs.list) > 0 || len(bad) > 0 {
		t.Fatalf("problems: %v %v %v", fatal, errs.list, bad)
	}
	want := map[string]any{
		"base": map[string]any{"x": json.Number("1"), "y": json.Number("2")},
		"more": map[string]any{"y": json.Number("3"), "z": json.Number("4")},
		"list": []any{map[string]any{"y": json.Number("3"), "z": json.Number("4")}, map[string]any{"w": json.Number("5")}},
		"o":    map[string]any{"x": json.Number("0"), "y": json.Number("2"), "z": json.Number("4")},
		"p":    map[string]any{"y": json.Number("3"), "z": json.Number("4"), "w": json.Number("5")},
		"n":    []any{json.Number("9007199254740992"), json.Number("1.5"), json.Number("-16"), json.Number("1000"), nil, true, "2026-12-24", "aGk="},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v\nwant %#v", got, want)
	}
}

// The values the conversion could not convert are named, so the schema's
// complaint about their stand-ins is not repeated; a tagged mapping is
// converted and not among them.
func TestConvertBad(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("a: !!bool x\nb: !vault y\nc: !!set {k}\nd: [.inf]\ne: ok\n"), &doc); err != nil {
		t.Fatal(err)
	}
	errs := &errorList{}
	_, bad, fatal := convert(doc.Content[0], errs)
	if fatal != nil {
		t.Fatal(fatal)
	}
	if want := map[string]bool{"/a": true, "/b": true, "/d/0": true}; !reflect.DeepEqual(bad, want) {
		t.Errorf("got bad %v, want %v", bad, want)
	}
	if got := len(errs.list); got != 4 {
		t.Errorf("got %d errors, want 4: %v", got, errs.list)
	}
}
