package descriptor

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/manent"
)

// ParseAll keeps the descriptor when its only problems are manent's rules
// between values the schema accepts (a step placed at an unknown step), so
// that the server can check its plugins too; with a problem of shape (an
// unknown field, a wrong type) it keeps none. Parse never returns one with
// an error.
func TestParseAllKeepsAShapedDescriptor(t *testing.T) {
	base := "apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: \"1\"\nartifact: {url: https://a.example/x.tgz}\n"
	placed := base + "steps:\n  - {name: check, before: actvation, plugin: scrip, with: {command: [\"true\"]}}\n"
	d, err := ParseAll([]byte(placed))
	if err == nil || d == nil || len(d.Steps) != 1 || d.Steps[0].Plugin != "scrip" {
		t.Fatalf("ParseAll of a misplaced step: %+v, %v; want the descriptor and the error", d, err)
	}
	if d, err := Parse([]byte(placed)); d != nil || err == nil {
		t.Fatalf("Parse of a misplaced step: %+v, %v; want no descriptor", d, err)
	}
	for _, bad := range []string{
		placed + "bogus: 1\n",
		strings.Replace(placed, `version: "1"`, "version: [1]", 1),
	} {
		if d, err := ParseAll([]byte(bad)); d != nil || err == nil {
			t.Errorf("ParseAll of %q: %+v, %v; want no descriptor and an error", bad, d, err)
		}
	}
}

// Merge places the server's problems, sorts them among the descriptor's
// own by position and bounds the whole at 100, the last saying how many
// more there are; only the first of a hostile number of problems are
// placed.
func TestMergeOrdersAndBounds(t *testing.T) {
	data := []byte("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: \"1\"\nartifact: {url: https://a.example/x.tgz}\n" +
		"target: {plugin: nosuch}\nsteps:\n  - {name: check, before: actvation, plugin: script}\n")
	_, err := ParseAll(data)
	var own *manent.Error
	if !errors.As(err, &own) || len(own.Fields) != 1 {
		t.Fatalf("ParseAll: %v, want one problem", err)
	}
	got := Merge(data, own, []manent.FieldError{{Path: "/steps/0/plugin", Message: "b"}, {Path: "/target/plugin", Message: "a"}})
	var order []string
	for _, f := range got.Fields {
		order = append(order, fmt.Sprintf("%d:%d %s", f.Line, f.Column, f.Path))
	}
	if want := "[6:18 /target/plugin 8:27 /steps/0/before 8:46 /steps/0/plugin]"; fmt.Sprint(order) != want || got.Code != manent.EInvalid {
		t.Errorf("merged %v (%s), want %s", order, got.Code, want)
	}

	many := make([]manent.FieldError, 70000)
	for i := range many {
		many[i] = manent.FieldError{Path: fmt.Sprintf("/target/with/k%d", i), Message: "unknown"}
	}
	got = Merge(data, own, many)
	if len(got.Fields) != 100 || got.Fields[99].Message != "… and 69902 more problems not shown: fix these and validate again" ||
		got.Message != "descriptor is invalid: 70001 errors" {
		t.Errorf("merged %d problems, last %+v, message %q; want 100, the last counting the 69,902 others", len(got.Fields), got.Fields[len(got.Fields)-1], got.Message)
	}
}
