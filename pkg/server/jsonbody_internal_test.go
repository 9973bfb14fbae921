package server

import (
	"fmt"
	"strings"
	"testing"
)

// A JSON body is one object, once: a key given twice (which one counts
// depends on who reads it: encoding/json keeps the last, many proxies and
// languages the first), what follows the value, a byte-order mark, a byte
// that is not UTF-8 (encoding/json made it U+FFFD, silently) or nesting
// beyond any body of the API are refused, each saying what and where.
func TestJSONBodyRefusals(t *testing.T) {
	type body struct {
		Comment    string `json:"comment"`
		PlanDigest string `json:"plan_digest"`
		Nested     any    `json:"nested"`
	}
	deep := strings.Repeat(`{"a":`, 100) + "1" + strings.Repeat("}", 100)
	for _, tt := range []struct {
		name, in string
		want     string // in the error; "" = accepted
	}{
		{"plain", `{"comment": "ok", "plan_digest": "sha256:1"}`, ""},
		{"trailing space", "{\"comment\": \"ok\"}\n\t ", ""},
		{"nested keys alike in different objects", `{"nested": [{"a": 1}, {"a": 2}], "comment": "a"}`, ""},
		{"duplicate key", `{"plan_digest": "sha256:1", "comment": "x", "plan_digest": "sha256:2"}`, `the key "plan_digest" is given twice (at byte 2 and at byte 45): give it once`},
		{"duplicate nested key", `{"nested": {"a": 1, "a": 2}}`, `the key "a" is given twice`},
		{"trailing garbage", `{"comment": "ok"} garbage`, "at byte 19 after the JSON object: send one JSON object and nothing after it"},
		{"two objects", `{"comment": "ok"}{"comment": "no"}`, "at byte 18 after the JSON object"},
		{"bom", "\ufeff{\"comment\": \"ok\"}", "begins with a byte-order mark (U+FEFF): send UTF-8 without one"},
		{"utf-16", "{\x00\"\x00c\x00", "holds a NUL byte at byte 2 (UTF-16? send UTF-8 JSON)"},
		{"invalid utf-8", "{\"comment\": \"caf\xe9\"}", "is not UTF-8 text: invalid byte 0xe9 at byte 17"},
		{"too deep", deep, "nests deeper than 32 levels"},
		{"unknown field", `{"coment": "x"}`, `unknown field "coment"`},
		{"not an object", `"ok"`, "the body is a string, want an object"},
		{"field of another type", `{"comment": -1}`, `"comment" is a number, want a string`},
		{"long unknown field", `{"` + strings.Repeat("k", 10<<10) + `": 1}`, `unknown field "` + strings.Repeat("k", maxEchoed) + `…"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var v body
			err := jsonUnmarshalStrict([]byte(tt.in), &v)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// BenchmarkJSONBodyCheck measures the checks over a body of 1 MiB (the
// most any route but an agent's report reads).
func BenchmarkJSONBodyCheck(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"items": [`)
	for i := 0; sb.Len() < 1<<20; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`{"name": "pod-1234567890", "phase": "Running", "ready": true, "restarts": 3}`)
	}
	sb.WriteString("]}")
	in := []byte(sb.String())
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if err := checkJSONBody(in); err != nil {
			b.Fatal(err)
		}
	}
}

// Keys are compared as they read: an escaped spelling of a key is the key.
func TestJSONBodyEscapedDuplicate(t *testing.T) {
	err := checkJSONBody([]byte(`{"to": "1.0", "t\u006f": "2.0"}`))
	if err == nil || !strings.Contains(err.Error(), `the key "to" is given twice (at byte 2 and at byte 15)`) {
		t.Fatalf("got %v", err)
	}
	var many strings.Builder
	many.WriteString("{")
	for i := range 40 {
		fmt.Fprintf(&many, `"k%d": %d, `, i, i)
	}
	many.WriteString(`"k7": 0}`)
	if err := checkJSONBody([]byte(many.String())); err == nil || !strings.Contains(err.Error(), `the key "k7" is given twice`) {
		t.Fatalf("a duplicate among 41 keys: %v", err)
	}
}

func TestJSONBodyEmptyOrCut(t *testing.T) {
	for in, want := range map[string]string{
		" \n":           "the body holds no JSON value",
		`{"comment": "`: "the body ends inside its JSON value",
	} {
		if err := checkJSONBody([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", in, err, want)
		}
	}
}
