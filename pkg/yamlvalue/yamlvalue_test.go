package yamlvalue_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/manent-io/manent/pkg/yamlvalue"
)

func parse(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

// convert runs Convert with the limits descriptors use and returns the
// value and each problem as "pointer: message [fatal|bad] @line".
func convert(t *testing.T, src string, numbers yamlvalue.Numbers) (any, bool, []string) {
	t.Helper()
	var problems []string
	v, ok := yamlvalue.Convert(parse(t, src), yamlvalue.Options{
		MaxDepth: 64, MaxValues: 1000, Numbers: numbers,
		Report: func(p yamlvalue.Problem) {
			s := yamlvalue.Pointer(p.Tokens) + ": " + p.Message
			if p.Fatal {
				s += " [fatal]"
			}
			if p.BadValue {
				s += " [bad]"
			}
			problems = append(problems, s)
		},
	})
	return v, ok, problems
}

func TestConvertValues(t *testing.T) {
	src := `
base: &base {a: 1, b: two}
m:
  <<: *base
  b: three
big: 9007199254740992
f: 1.5
t: 2026-12-04T10:00:00Z
n: ~
yes: true
list: [1, x]
`
	v, ok, problems := convert(t, src, yamlvalue.JSONNumbers)
	if !ok || len(problems) > 0 {
		t.Fatalf("ok %v, problems %v", ok, problems)
	}
	m := v.(map[string]any)
	if got := m["m"]; !reflect.DeepEqual(got, map[string]any{"a": json.Number("1"), "b": "three"}) {
		t.Errorf("merge: %#v, want the explicit key to win", got)
	}
	if m["big"] != json.Number("9007199254740992") || m["f"] != json.Number("1.5") {
		t.Errorf("numbers: %#v %#v, want exact json.Number", m["big"], m["f"])
	}
	if m["t"] != "2026-12-04T10:00:00Z" || m["n"] != nil || m["yes"] != true {
		t.Errorf("timestamp %#v, null %#v, bool %#v", m["t"], m["n"], m["yes"])
	}
	// Past 2^53 an integer would reach a step with other digits (deploys
	// travel as JSON read into float64): refused, in both forms.
	for _, numbers := range []yamlvalue.Numbers{yamlvalue.JSONNumbers, yamlvalue.Float64} {
		_, _, problems := convert(t, "a: 9007199254740993\nb: -12345678901234567890\nc: 123456789012345678901234567890\nd: 1.5e300\n", numbers)
		want := []string{
			"/a: the integer 9007199254740993 cannot be kept exactly (it is beyond ±2^53); quote it to pass it as a string [bad]",
			"/b: the integer -12345678901234567890 cannot be kept exactly (it is beyond ±2^53); quote it to pass it as a string [bad]",
			"/c: the integer 123456789012345678901234567890 cannot be kept exactly (it is beyond ±2^53); quote it to pass it as a string [bad]",
		}
		if !reflect.DeepEqual(problems, want) {
			t.Errorf("numbers %v: problems\n%q\nwant\n%q", numbers, problems, want)
		}
	}
	v, _, _ = convert(t, src, yamlvalue.Float64)
	if got := v.(map[string]any)["list"]; !reflect.DeepEqual(got, []any{1.0, "x"}) {
		t.Errorf("Float64 numbers: %#v", got)
	}
}

func TestConvertProblems(t *testing.T) {
	tests := []struct {
		name, src string
		ok        bool
		want      string
	}{
		{"duplicate key", "a: 1\nb: 2\na: 3\n", true, `/a: duplicate field "a" (first at line 1)`},
		{"non-scalar key", "? [a]\n: 1\n", true, ": a key must be a plain value, not a list or a mapping"},
		{"bad bool", "a: !!bool maybe\n", true, `/a: not a valid boolean: "maybe" [bad]`},
		{"infinite", "a: .inf\n", true, "/a: must be a finite number, got .inf [bad]"},
		{"out of range", "a: 1e400\n", true, "/a: the number 1e400 is out of range (quote it to pass it as a string) [bad]"},
		{"out of range, negative", "a: -2.5E+999\n", true, "/a: the number -2.5E+999 is out of range (quote it to pass it as a string) [bad]"},
		{"unsupported tag", "a: !!set {x: 1}\n", true, `/a: unsupported YAML tag "!!set"`},
		{"merge of a scalar", "a:\n  <<: 1\n", true, "/a: a merge (<<) takes a mapping or a list of mappings"},
		{"alias cycle", "a: &x [*x]\n", false, "/a/0/0: alias *x refers to a value that contains it [fatal]"},
		{"too deep", "a: " + strings.Repeat("[", 70) + strings.Repeat("]", 70) + "\n", false, "nested more than 64 levels deep [fatal]"},
		{"too many values", "a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n", false, "more than 1000 values (too many YAML aliases?) [fatal]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ok, problems := convert(t, tt.src, yamlvalue.JSONNumbers)
			if ok != tt.ok || !strings.Contains(strings.Join(problems, "\n"), tt.want) {
				t.Errorf("ok %v, problems %q; want ok %v and %q", ok, problems, tt.ok, tt.want)
			}
		})
	}
}

func TestPointer(t *testing.T) {
	tokens := []string{"parameters", "a/b", "c~d", "0"}
	p := yamlvalue.Pointer(tokens)
	if p != "/parameters/a~1b/c~0d/0" || !reflect.DeepEqual(yamlvalue.SplitPointer(p), tokens) {
		t.Errorf("Pointer %q, back %q", p, yamlvalue.SplitPointer(p))
	}
	if yamlvalue.SplitPointer("") != nil {
		t.Error("the empty pointer has no tokens")
	}
}
