package descriptor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// NamePattern is the schema's rule of application and environment names
// ($defs/name), not a copy that could drift from it, and ValidName agrees
// with what Parse accepts.
func TestNamePatternIsTheSchemas(t *testing.T) {
	var doc struct {
		Defs struct {
			Name struct{ Pattern string } `json:"name"`
		} `json:"$defs"`
		Properties map[string]struct {
			Ref string `json:"$ref"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(Schema(), &doc); err != nil {
		t.Fatal(err)
	}
	if got, want := NamePattern.String(), doc.Defs.Name.Pattern; got != want || want == "" {
		t.Errorf("NamePattern is %q, the schema's $defs/name pattern %q", got, want)
	}
	for _, field := range []string{"application", "environment"} {
		if ref := doc.Properties[field].Ref; ref != "#/$defs/name" {
			t.Errorf("%s is %q in the schema, want #/$defs/name", field, ref)
		}
	}
	if got, want := patternHint(NamePattern.String()), NameRule; got != want {
		t.Errorf("the schema error explains the pattern as %q, NameRule is %q", got, want)
	}
	for _, name := range []string{"billing", "prod", "a", "0", "eu-west-1", strings.Repeat("a", 63),
		"", "Billing", "bill ing", "../x", "-x", "x_y", "x.y", "é", strings.Repeat("a", 64), "x\n"} {
		_, err := Parse([]byte(fmt.Sprintf("apiVersion: manent/v1\napplication: %q\nenvironment: %q\nversion: \"1\"\nartifact: {url: \"https://a.example/b.tgz\"}\n", name, name)))
		if parsed := err == nil; parsed != ValidName(name) {
			t.Errorf("ValidName(%q) = %v, but Parse says %v", name, ValidName(name), err)
		}
	}
}

// MaxVersion is the schema's maxLength of version, and VersionProblem
// agrees with what Parse accepts.
func TestVersionProblemIsTheSchemas(t *testing.T) {
	var doc struct {
		Properties map[string]struct {
			MaxLength int `json:"maxLength"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(Schema(), &doc); err != nil {
		t.Fatal(err)
	}
	if got, want := MaxVersion, doc.Properties["version"].MaxLength; got != want {
		t.Errorf("MaxVersion is %d, the schema's maxLength of version %d", got, want)
	}
	for _, v := range []string{"1", "1.4.2", "1 – hotfix", "é", strings.Repeat("é", 256),
		"", strings.Repeat("v", 257), "1\n", "1\x1b[2J", "a\u202eb", "\t1",
		"1.2\u200f.3", "1\u200e", "1\u061c", "\u05d2\u05e8\u05e1\u05d4 2", "\u0625\u0635\u062f\u0627\u0631 3"} {
		_, err := Parse([]byte(fmt.Sprintf("apiVersion: manent/v1\napplication: a\nenvironment: b\nversion: %q\nartifact: {url: \"https://a.example/b.tgz\"}\n", v)))
		if parsed, problem := err == nil, VersionProblem(v); parsed != (problem == "") {
			t.Errorf("VersionProblem(%.20q) = %q, but Parse says %v", v, problem, err)
		}
	}
	// A bidirectional mark reorders what is around it: "1.2\u200f.3"
	// reads "1.23." in a left-to-right line. Hebrew and Arabic letters are
	// text like any other.
	for v, refused := range map[string]bool{"1.2\u200f.3": true, "1\u200e": true, "1\u061c": true,
		"\u05d2\u05e8\u05e1\u05d4 2": false, "\u0625\u0635\u062f\u0627\u0631 3": false} {
		if got := VersionProblem(v) != ""; got != refused {
			t.Errorf("VersionProblem(%q) refuses: %v, want %v", v, got, refused)
		}
	}
}
