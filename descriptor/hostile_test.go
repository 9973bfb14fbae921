package descriptor

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/manent"
)

// hostile is a descriptor written to make Parse slow or hungry: as close to
// MaxSize as its shape allows. The test checks what Parse answers; the
// benchmark (BenchmarkParseHostile) measures how long it takes.
type hostile struct {
	name  string
	data  []byte
	valid bool   // the input is a valid descriptor (a big but honest one)
	want  string // in one of the field errors' messages
}

// fill repeats line(i) after head until the next line would pass MaxSize.
func fill(head string, line func(i int) string) []byte {
	var b strings.Builder
	b.WriteString(head)
	for i := 0; ; i++ {
		l := line(i)
		if b.Len()+len(l) > MaxSize {
			break
		}
		b.WriteString(l)
	}
	return []byte(b.String())
}

func hostileInputs() []hostile {
	steps := valid + "steps:\n"
	var laughs strings.Builder
	laughs.WriteString(valid + "parameters:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n  b:\n")
	return []hostile{
		{name: "unknown top-level fields", want: `unknown field "k0000000"`,
			data: fill(valid, func(i int) string { return fmt.Sprintf("k%07d: 1\n", i) })},
		{name: "unknown fields in artifact", want: `unknown field "k0000000"`,
			data: fill("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: \"1\"\nartifact:\n  url: https://a/b\n",
				func(i int) string { return fmt.Sprintf("  k%07d: 1\n", i) })},
		{name: "unknown fields near known names", want: `did you mean`,
			data: fill(valid, func(i int) string { return fmt.Sprintf("versio%d: 1\n", i) })},
		{name: "long unknown field names", want: `unknown field "k0000000xxx`,
			data: fill(valid, func(i int) string { return fmt.Sprintf("k%07d%s: 1\n", i, strings.Repeat("x", 1000)) })},
		{name: "one huge field name", want: `unknown field "kkk`,
			data: []byte(valid + "? " + strings.Repeat("k", MaxSize-len(valid)-10) + "\n: 1\n")},
		{name: "duplicate fields", want: `duplicate field "version"`,
			data: fill(valid, func(int) string { return "version: \"1\"\n" })},
		{name: "huge version", want: `must be at most 256 characters`,
			data: []byte("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nartifact: {url: \"https://a/b\"}\nversion: " +
				strings.Repeat("v", MaxSize-120) + "\n")},
		{name: "huge artifact url", want: `must be at most`,
			data: []byte("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: \"1\"\nartifact: {url: \"https://" +
				strings.Repeat("a", MaxSize-120) + "\"}\n")},
		{name: "steps without fields", want: `more than 100000 values`,
			data: fill(steps, func(int) string { return "  - {}\n" })},
		{name: "steps with unknown anchors", want: `must have at most 200 items`,
			data: fill(steps, func(i int) string { return fmt.Sprintf("  - {name: s%07d, before: x%07d, plugin: script}\n", i, i) })},
		{name: "steps in a chain", want: `must have at most 200 items`,
			data: fill(steps+"  - {name: s0, before: deploy, plugin: script}\n",
				func(i int) string { return fmt.Sprintf("  - {name: s%d, after: s%d, plugin: script}\n", i+1, i) })},
		{name: "steps in a loop", want: `must have at most 200 items`,
			data: fill(steps+"  - {name: s0, after: s1, plugin: script}\n",
				func(i int) string { return fmt.Sprintf("  - {name: s%d, after: s%d, plugin: script}\n", i+1, i+2) })},
		{name: "steps with one name", want: `must have at most 200 items`,
			data: fill(steps, func(int) string { return "  - {name: same, before: deploy, plugin: script}\n" })},
		{name: "steps with unknown fields", want: `unknown field "k"`,
			data: fill(steps, func(i int) string { return fmt.Sprintf("  - {name: s%d, before: deploy, plugin: script, k: 1}\n", i) })},
		{name: "rollback on unknown steps", want: `must have at most 256 items`,
			data: fill(valid+"rollback:\n  on:\n", func(i int) string { return fmt.Sprintf("    - x%07d\n", i) })},
		{name: "health without urls", want: `missing required field "url"`,
			data: fill(valid+"health:\n", func(int) string { return "  - {timeout: 1xxxxx}\n" })},
		{name: "duplicate dependencies", want: `must have at most`,
			data: fill(valid+"after:\n", func(int) string { return "  - dpl_same\n" })},
		{name: "waves with one name", want: `more than 100000 values`,
			data: fill(valid+"rollout:\n  waves:\n", func(int) string { return "    - {name: w, targets: [a], observe: 1x}\n" })},
		{name: "few waves with one name", want: `must have at most 100 items`,
			data: fill(valid+"rollout:\n  waves:\n", func(int) string {
				return "    - {name: w, targets: [" + strings.Repeat("a", 200) + "], observe: " + strings.Repeat("1", 50) + "x}\n"
			})},
		{name: "percentages", want: `more than 100000 values`,
			data: fill(valid+"rollout:\n  percentages:\n", func(int) string { return "    - 1\n" })},
		{name: "control characters", want: `version must be a single line of plain text: it contains an escape character (U+001B`,
			data: fill("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nartifact: {url: \"https://a/b\"}\nversion: \""+
				strings.Repeat(`\e[2J`, 50)+"\"\nsecrets:\n", func(i int) string { return fmt.Sprintf("  S%d: \"env:\\e]0;x\\a\"\n", i) })},
		{name: "deep flow nesting", want: `nested more than`,
			data: []byte(valid + "parameters: " + strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000) + "\n")},
		{name: "many nested values", want: `more than 100000 values`,
			data: append(fill(valid+"parameters:\n  p: [", func(int) string { return "[[[[1]]]], " })[:MaxSize-2], ']', '\n')},
		{name: "alias fan-out", want: `more than 100000 values`,
			data: fill(laughs.String(), func(int) string { return "    - *a\n" })},
		{name: "merge fan-out", want: `more than 100000 values`,
			data: fill(valid+"parameters:\n  a: &a {x: 1, y: 2, z: 3}\n  b:\n", func(i int) string { return fmt.Sprintf("    k%d: {<<: *a}\n", i) })},
		{name: "many parameters", valid: true,
			data: fill(valid+"parameters:\n", func(i int) string { return fmt.Sprintf("  p%07d: 1\n", i) })},
		{name: "200 steps", valid: true,
			data: []byte(valid + "steps:\n" + func() string {
				var b strings.Builder
				b.WriteString("  - {name: s0, before: deploy, plugin: script}\n")
				for i := 1; i < maxSteps; i++ {
					fmt.Fprintf(&b, "  - {name: s%d, after: s%d, plugin: script}\n", i, i-1)
				}
				return b.String()
			}())},
	}
}

// TestParseHostile: whatever a descriptor of up to 1 MiB holds, Parse
// answers with at most maxErrors field errors that explain it (the time it
// takes is BenchmarkParseHostile's).
func TestParseHostile(t *testing.T) {
	for _, h := range hostileInputs() {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			if len(h.data) > MaxSize {
				t.Fatalf("input is %d bytes, more than MaxSize", len(h.data))
			}
			d, err := Parse(h.data)
			if h.valid {
				if err != nil {
					t.Fatalf("got %v, want a valid descriptor", err)
				}
				return
			}
			if d != nil {
				t.Fatal("got a descriptor, want none")
			}
			var e *manent.Error
			if !errors.As(err, &e) || e.Code != manent.EInvalid {
				t.Fatalf("got %v, want an EInvalid error", err)
			}
			if len(e.Fields) == 0 || len(e.Fields) > maxErrors {
				t.Fatalf("got %d field errors, want 1 to %d", len(e.Fields), maxErrors)
			}
			found := false
			size := 0
			for _, f := range e.Fields {
				found = found || strings.Contains(f.Message, h.want)
				size += len(f.Message) + len(f.Path)
			}
			if !found {
				t.Errorf("no field error contains %q; first: %+v", h.want, e.Fields[0])
			}
			if size > 64<<10 {
				t.Errorf("the field errors hold %d bytes of text, want at most 64 KiB", size)
			}
		})
	}
}

// BenchmarkParseHostile measures Parse on each hostile input: ns/op is the
// time one request costs the server before authentication, which must stay
// well under a second (SPEC §11.1); cpu-ms/op is the CPU time the process
// used per Parse, garbage collection included, which a busy machine
// inflates less than the wall clock.
func BenchmarkParseHostile(b *testing.B) {
	if _, err := Parse([]byte(valid)); err != nil { // compile the schema outside the loop
		b.Fatal(err)
	}
	for _, h := range hostileInputs() {
		b.Run(strings.ReplaceAll(h.name, " ", "_"), func(b *testing.B) {
			b.SetBytes(int64(len(h.data)))
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				_, _ = Parse(h.data)
			}
			b.ReportMetric(float64(cpuTime()-start)/1e6/float64(b.N), "cpu-ms/op")
		})
	}
}
