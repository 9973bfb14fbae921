package descriptor

import (
	"gopkg.in/yaml.v3"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/yamlvalue"
)

// Limits on the shape of a descriptor, so hostile YAML cannot make Parse
// slow or hungry: nesting depth, and the number of values once aliases are
// expanded ("billion laughs").
const (
	maxDepth  = 64
	maxValues = 100_000
)

// convert turns the YAML tree into the generic value the JSON Schema
// validates (map[string]any, []any, string, json.Number, bool and nil),
// with pkg/yamlvalue, the one YAML reading. Problems that do not stop the
// conversion (a duplicate key, an unsupported tag) go to errs, and the
// paths of values that could not be converted to bad; a fatal one (too
// deep, too many values, an alias that contains itself) is returned and
// ends it.
func convert(root *yaml.Node, errs *errorList) (v any, bad map[string]bool, fatal *manent.FieldError) {
	bad = make(map[string]bool)
	v, ok := yamlvalue.Convert(root, yamlvalue.Options{
		MaxDepth: maxDepth, MaxValues: maxValues, Numbers: yamlvalue.JSONNumbers, Subject: "the descriptor",
		Report: func(p yamlvalue.Problem) {
			fe := fieldError(yamlvalue.Pointer(p.Tokens), p.Node, p.Message)
			if p.Fatal {
				fatal = &fe
				return
			}
			if p.BadValue {
				// The schema's complaint about the stand-in value is
				// then not repeated.
				bad[fe.Path] = true
			}
			if errs.full() {
				errs.more = true
				return
			}
			errs.add(fe)
		},
	})
	if !ok {
		return nil, bad, fatal
	}
	return v, bad, nil
}

// tree is the YAML tree of a descriptor, indexed for finding the node of
// each error (yamlvalue.Tree), with the length of each list cut for the
// schema (trimLists), by JSON pointer.
type tree struct {
	*yamlvalue.Tree
	listLen map[string]int
}

func newTree(root *yaml.Node) *tree {
	return &tree{Tree: yamlvalue.NewTree(root), listLen: make(map[string]int)}
}

// locate finds the node at a JSON pointer (as tokens): see yamlvalue.Locate.
func (t *tree) locate(tokens []string) (key, val *yaml.Node) { return t.Locate(tokens) }

// pointer builds a JSON pointer (RFC 6901) from unescaped tokens.
func pointer(tokens []string) string { return yamlvalue.Pointer(tokens) }

func fieldError(path string, n *yaml.Node, msg string) manent.FieldError {
	fe := manent.FieldError{Path: path, Message: msg}
	if n != nil {
		fe.Line, fe.Column = n.Line, n.Column
	}
	return fe
}
