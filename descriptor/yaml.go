package descriptor

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

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
			msg := p.Message
			if p.OutOfRange && p.Node != nil {
				// "Quote it" would make it a string, refused next: an
				// integer field says its range instead.
				if r := integerRange(p.Tokens); r != "" {
					msg = fmt.Sprintf("must be an integer %s, got %s", r, p.Node.Value)
				}
			}
			fe := fieldError(yamlvalue.Pointer(p.Tokens), p.Node, msg)
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

// integerRange says the range of the integer field at tokens in the
// embedded schema ("from 0 to 20", "of at least 1"), or "" when the field
// there is not an integer (or has no bound, or there is none).
func integerRange(tokens []string) string {
	set, err := compiled()
	if err != nil {
		return ""
	}
	s := schemaAt(set.raw, tokens)
	if s == nil || s["type"] != "integer" {
		return ""
	}
	lo, hasLo := s["minimum"].(json.Number)
	hi, hasHi := s["maximum"].(json.Number)
	switch {
	case hasLo && hasHi:
		return fmt.Sprintf("from %s to %s", lo, hi)
	case hasLo:
		return fmt.Sprintf("of at least %s", lo)
	case hasHi:
		return fmt.Sprintf("of at most %s", hi)
	}
	return ""
}

// schemaAt is the schema (raw JSON, its $refs to #/$defs followed) of the
// value at tokens: through properties, items and additionalProperties.
func schemaAt(root any, tokens []string) map[string]any {
	s := resolveRef(root, root)
	for _, t := range tokens {
		if s == nil {
			return nil
		}
		props, _ := s["properties"].(map[string]any)
		_, isIndex := strconv.Atoi(t)
		switch {
		case props[t] != nil:
			s = resolveRef(root, props[t])
		case s["items"] != nil && isIndex == nil:
			s = resolveRef(root, s["items"])
		default:
			ap, _ := s["additionalProperties"].(map[string]any)
			s = resolveRef(root, ap)
		}
	}
	return s
}

// resolveRef follows the local $ref of schema s ("#/$defs/maxRetries").
func resolveRef(root, s any) map[string]any {
	m, _ := s.(map[string]any)
	for range 8 { // a cycle of $refs ends here
		ref, _ := m["$ref"].(string)
		if m == nil || ref == "" {
			return m
		}
		frag, ok := strings.CutPrefix(ref, "#")
		if !ok {
			return nil
		}
		m, _ = rawAt(root, frag).(map[string]any)
	}
	return nil
}

// rawAt is the value at JSON pointer ptr ("/$defs/name") in the raw
// embedded schema root, or nil when there is none.
func rawAt(root any, ptr string) any {
	n := root
	for _, t := range yamlvalue.SplitPointer(ptr) {
		m, ok := n.(map[string]any)
		if !ok {
			return nil
		}
		n = m[t]
	}
	return n
}
