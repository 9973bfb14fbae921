package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriteJQ(t *testing.T) {
	doc := map[string]any{
		"id": "dpl_1", "n": 3, "big": uint64(1) << 60, "ok": true, "none": nil,
		"text": "two\nlines <&> ünï", "items": []string{"a", "b"},
	}
	for _, tt := range []struct{ expr, want string }{
		{".id", "dpl_1\n"},
		{".text", "two\nlines <&> ünï\n"},          // raw, nothing escaped
		{".items[]", "a\nb\n"},                     // one result per line
		{".items", `["a","b"]` + "\n"},             // compact JSON
		{"{id, n}", `{"id":"dpl_1","n":3}` + "\n"}, // keys sorted, compact
		{".big", "1152921504606846976\n"},          // integers keep their digits
		{".ok, .none, .missing", "true\nnull\nnull\n"},
		{".items[] | select(. == \"z\")", ""},
		{"halt", ""},
		{`"x" | ascii_upcase`, "X\n"},
	} {
		code, err := compileJQ(tt.expr)
		if err != nil {
			t.Fatalf("%s: %v", tt.expr, err)
		}
		var buf bytes.Buffer
		if err := writeJQ(&buf, code, doc); err != nil {
			t.Fatalf("%s: %v", tt.expr, err)
		}
		if got := buf.String(); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.expr, got, tt.want)
		}
	}

	// A runtime error: what came before is printed, then the error.
	code, err := compileJQ(`.items[], (.id | keys)`)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err = writeJQ(&buf, code, doc)
	if err == nil || !strings.HasPrefix(err.Error(), "--jq: ") || buf.String() != "a\nb\n" {
		t.Errorf("runtime error: err %v, output %q", err, buf.String())
	}

	for _, bad := range []string{".[", "foo(", "{", ".a | unknownfn"} {
		if _, err := compileJQ(bad); err == nil || !strings.Contains(err.Error(), "bad jq expression") {
			t.Errorf("compileJQ(%q) = %v, want a bad expression error", bad, err)
		}
	}
}
