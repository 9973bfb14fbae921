package descriptor_test

import (
	"testing"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/manent"
)

// Positions locates the paths of errors found after parsing in the text,
// YAML or JSON, through anchors and merges; it leaves alone an error that
// has a position, a path the text does not hold and the whole descriptor.
func TestPositions(t *testing.T) {
	yml := []byte(`apiVersion: manent/v1
application: billing
environment: prod
version: "1"
artifact: {url: "file:///tmp/a.tgz"}
parameters: &defaults
  plugin: nosuch
steps:
  - name: smoke
    after: deploy
    <<: *defaults
`)
	json := []byte(`{"apiVersion": "manent/v1", "application": "billing", "environment": "prod", "version": "1",
 "artifact": {"url": "file:///tmp/a.tgz"}, "steps": [{"name": "smoke", "after": "deploy", "plugin": "nosuch"}]}`)
	if _, err := descriptor.Parse(yml); err != nil {
		t.Fatalf("the test's descriptor: %v %+v", err, err.(*manent.Error).Fields)
	}
	if _, err := descriptor.Parse(json); err != nil {
		t.Fatalf("the test's JSON descriptor: %v", err)
	}
	for _, tt := range []struct {
		name string
		data []byte
		want map[string][2]int
	}{
		{"yaml", yml, map[string][2]int{
			"/steps/0/plugin": {7, 11}, // through the merge, where the value is written
			"/environment":    {3, 14},
			"/target/with":    {0, 0}, // from the environment configuration
			"/":               {0, 0},
			"/version":        {1, 2}, // already placed: kept
		}},
		{"json", json, map[string][2]int{
			"/steps/0/plugin": {2, 101},
			"/environment":    {1, 70},
		}},
	} {
		var fields []manent.FieldError
		for path := range tt.want {
			f := manent.FieldError{Path: path, Message: "m"}
			if path == "/version" {
				f.Line, f.Column = 1, 2
			}
			fields = append(fields, f)
		}
		descriptor.Positions(tt.data, fields)
		for _, f := range fields {
			if w := tt.want[f.Path]; f.Line != w[0] || f.Column != w[1] {
				t.Errorf("%s: %s at %d:%d, want %d:%d", tt.name, f.Path, f.Line, f.Column, w[0], w[1])
			}
		}
	}
	// Nothing to place: the text is not read (nil would not parse).
	descriptor.Positions(nil, []manent.FieldError{{Path: "/", Message: "m"}, {Path: "/x", Line: 1, Column: 1}})
}
