package yamlvalue_test

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/manent-io/manent/pkg/yamlvalue"
)

// TestLocate: the one path-to-position lookup (descriptors and governance
// rules): keys, indexes, aliases and merges as a YAML reader sees them, and
// the deepest node found for a path that does not exist.
func TestLocate(t *testing.T) {
	src := strings.Join([]string{
		"base: &base", //  1
		"  retries: 3",
		"  timeout: 5s",
		"steps:",
		"  - name: a", //   5
		"    <<: *base",
		"  - name: b",
		"    retries: 1",
		"alias: *base",
	}, "\n")
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path      string
		line, col int
		key       bool
		found     bool
	}{
		{"steps", 5, 3, true, true},
		{"steps/1/retries", 8, 14, true, true},
		{"steps/1", 7, 5, false, true},
		{"steps/0/retries", 2, 12, true, true},  // through the merge
		{"alias/timeout", 3, 12, true, true},    // through the alias
		{"steps/0/nope", 5, 5, false, false},    // the deepest node found: steps[0]
		{"steps/7", 5, 3, false, false},         // no such index: steps
		{"steps/0/name/x", 5, 11, false, false}, // below a scalar
		{"", 1, 1, false, true},
	}
	for _, tt := range tests {
		var path []string
		if tt.path != "" {
			path = strings.Split(tt.path, "/")
		}
		for _, root := range []*yaml.Node{&doc, doc.Content[0]} {
			k, v := yamlvalue.Locate(root, path)
			if v == nil || v.Line != tt.line || v.Column != tt.col || (k != nil) != tt.key {
				t.Errorf("Locate(%q) = key %v, value at %d:%d; want %d:%d, key %v", tt.path, k != nil, line(v), col(v), tt.line, tt.col, tt.key)
			}
			fk, fv, found := yamlvalue.NewTree(root).Find(path)
			if fk != k || fv != v || found != tt.found {
				t.Errorf("Find(%q) = %v, %v, found %v; want Locate's answer, found %v", tt.path, fk, fv, found, tt.found)
			}
		}
	}
	if k, v := yamlvalue.Locate(nil, []string{"x"}); k != nil || v != nil {
		t.Errorf("Locate(nil) = %v, %v", k, v)
	}
}

func line(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

func col(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Column
}
