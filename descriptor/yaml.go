package descriptor

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/manent-io/manent/pkg/manent"
)

// Limits on the shape of a descriptor, so hostile YAML cannot make Parse
// slow or hungry: nesting depth, and the number of values once aliases are
// expanded ("billion laughs").
const (
	maxDepth  = 64
	maxValues = 100_000
)

// converter turns a yaml.Node tree into the generic value the JSON Schema
// validates: map[string]any, []any, string, json.Number, bool and nil.
// Problems that do not stop the conversion (a duplicate key, an unsupported
// tag) are collected in errs; a fatal one (too deep, too many values, an
// alias that contains itself) is set in fatal and ends it.
type converter struct {
	values    int
	tokens    []string     // JSON pointer tokens of the value being converted
	expanding []*yaml.Node // alias targets being expanded, to detect cycles
	errs      *errorList
	bad       map[string]bool // paths of values that could not be converted
	fatal     *manent.FieldError
}

func (c *converter) path() string { return pointer(c.tokens) }

func (c *converter) errorAt(n *yaml.Node, format string, args ...any) {
	if c.errs.full() {
		c.errs.more = true
		return
	}
	c.errs.add(fieldError(c.path(), n, fmt.Sprintf(format, args...)))
}

// badValue reports a scalar that could not be converted; the schema's
// complaint about the stand-in value is then not repeated.
func (c *converter) badValue(n *yaml.Node, format string, args ...any) {
	if c.bad == nil {
		c.bad = make(map[string]bool)
	}
	c.bad[c.path()] = true
	c.errorAt(n, format, args...)
}

func (c *converter) fail(n *yaml.Node, format string, args ...any) {
	fe := fieldError(c.path(), n, fmt.Sprintf(format, args...))
	c.fatal = &fe
}

// value converts n, found at depth (the number of enclosing mappings and
// sequences). It returns false when the conversion must stop (see fatal).
func (c *converter) value(n *yaml.Node, depth int) (any, bool) {
	switch n.Kind {
	case yaml.AliasNode:
		return c.alias(n, depth)
	case yaml.ScalarNode:
		if !c.count(n) {
			return nil, false
		}
		return c.scalar(n), true
	case yaml.SequenceNode:
		if !c.enter(n, depth) {
			return nil, false
		}
		if tag := n.ShortTag(); tag != "!!seq" {
			c.errorAt(n, "unsupported YAML tag %q", n.Tag)
		}
		out := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			c.tokens = append(c.tokens, strconv.Itoa(i))
			v, ok := c.value(item, depth+1)
			c.tokens = c.tokens[:len(c.tokens)-1]
			if !ok {
				return nil, false
			}
			out = append(out, v)
		}
		return out, true
	case yaml.MappingNode:
		if !c.enter(n, depth) {
			return nil, false
		}
		if tag := n.ShortTag(); tag != "!!map" {
			c.errorAt(n, "unsupported YAML tag %q", n.Tag)
		}
		return c.mapping(n, depth)
	default:
		c.errorAt(n, "unexpected YAML node")
		return nil, true
	}
}

// count counts one more value and stops at maxValues.
func (c *converter) count(n *yaml.Node) bool {
	c.values++
	if c.values > maxValues {
		c.fail(n, "the descriptor expands to more than %d values (too many YAML aliases?)", maxValues)
		return false
	}
	return true
}

// enter checks a mapping or sequence about to be converted.
func (c *converter) enter(n *yaml.Node, depth int) bool {
	if depth >= maxDepth {
		c.fail(n, "nested more than %d levels deep", maxDepth)
		return false
	}
	return c.count(n)
}

func (c *converter) alias(n *yaml.Node, depth int) (any, bool) {
	target := n.Alias
	if target == nil {
		c.errorAt(n, "alias *%s refers to no anchor", n.Value)
		return nil, true
	}
	for _, t := range c.expanding {
		if t == target {
			c.fail(n, "alias *%s refers to a value that contains it", n.Value)
			return nil, false
		}
	}
	c.expanding = append(c.expanding, target)
	v, ok := c.value(target, depth)
	c.expanding = c.expanding[:len(c.expanding)-1]
	return v, ok
}

func (c *converter) mapping(n *yaml.Node, depth int) (any, bool) {
	out := make(map[string]any, len(n.Content)/2)
	seen := make(map[string]*yaml.Node, len(n.Content)/2)
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if isMergeKey(k) {
			merges = append(merges, v)
			continue
		}
		key, ok := keyString(k)
		if !ok {
			c.errorAt(k, "a key must be a plain value, not a list or a mapping")
			continue
		}
		c.tokens = append(c.tokens, key)
		if first, dup := seen[key]; dup {
			c.errorAt(k, "duplicate field %q (first at line %d)", key, first.Line)
			c.tokens = c.tokens[:len(c.tokens)-1]
			continue
		}
		seen[key] = k
		val, ok := c.value(v, depth+1)
		c.tokens = c.tokens[:len(c.tokens)-1]
		if !ok {
			return nil, false
		}
		out[key] = val
	}
	// Merge keys (<<: *base): explicit keys win, then earlier merges.
	for _, m := range merges {
		sources := []*yaml.Node{m}
		if r := resolve(m); r.Kind == yaml.SequenceNode {
			sources = r.Content
		}
		for _, src := range sources {
			if resolve(src).Kind != yaml.MappingNode {
				c.errorAt(src, "a merge (<<) takes a mapping or a list of mappings")
				continue
			}
			v, ok := c.value(src, depth)
			if !ok {
				return nil, false
			}
			merged, _ := v.(map[string]any)
			for k, v := range merged {
				if _, exists := out[k]; !exists {
					out[k] = v
				}
			}
		}
	}
	return out, true
}

// scalar converts a scalar by its resolved tag. Timestamps stay the text
// they were written as, so the schema's date-time format applies to it and
// dates in parameters are not rewritten.
func (c *converter) scalar(n *yaml.Node) any {
	switch tag := n.ShortTag(); tag {
	case "!!str", "!!binary", "!!timestamp", "!":
		return n.Value
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			c.badValue(n, "not a valid boolean: %q", n.Value)
			return n.Value
		}
		return b
	case "!!int":
		var v any
		if err := n.Decode(&v); err != nil {
			c.badValue(n, "not a valid integer: %q", n.Value)
			return n.Value
		}
		switch x := v.(type) {
		case int:
			return json.Number(strconv.Itoa(x))
		case int64:
			return json.Number(strconv.FormatInt(x, 10))
		case uint64:
			return json.Number(strconv.FormatUint(x, 10))
		case float64:
			return c.float(n, x)
		}
		c.badValue(n, "not a valid integer: %q", n.Value)
		return n.Value
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			c.badValue(n, "not a valid number: %q", n.Value)
			return n.Value
		}
		return c.float(n, f)
	default:
		c.badValue(n, "unsupported YAML tag %q", n.Tag)
		return n.Value
	}
}

func (c *converter) float(n *yaml.Node, f float64) any {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		c.badValue(n, "must be a finite number, got %s", n.Value)
		return nil
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
}

func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge"
}

// keyString returns the text of a mapping key, following an alias.
func keyString(k *yaml.Node) (string, bool) {
	k = resolve(k)
	if k.Kind != yaml.ScalarNode {
		return "", false
	}
	return k.Value, true
}

// resolve follows aliases (an anchored node is never itself an alias, but
// the loop is bounded anyway). It returns nil for nil.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; i < 8 && n != nil && n.Kind == yaml.AliasNode && n.Alias != nil; i++ {
		n = n.Alias
	}
	return n
}

// Locate finds the node at path (mapping keys, and list indexes as decimal
// text) in a YAML tree (a document node or its content) the way a YAML file
// is read: aliases followed, a key's first explicit occurrence, then the
// merged (<<) mappings in order. It returns the value node and, when the
// value is a field of a mapping, its key node; when path does not exist, the
// deepest node found on the way and a nil key. It is the one conversion from
// a path to a position (Line, Column) in YAML: descriptors and governance
// rules use it. For many lookups in one tree, a descriptor uses its indexed
// tree instead (same answers).
func Locate(root *yaml.Node, path []string) (key, val *yaml.Node) {
	if root != nil && root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	return newTree(root).locate(path)
}

// tree is the YAML tree of a descriptor with an index of its mappings' keys,
// built on first use, so that finding the node of each error is linear in
// the input however many errors there are.
type tree struct {
	root  *yaml.Node
	index map[*yaml.Node]*mappingIndex
	// listLen is the length of each list cut for the schema (trimLists),
	// by JSON pointer.
	listLen map[string]int
}

// mappingIndex is one mapping's explicit keys (first occurrence, as the
// converter reads them) and its merge (<<) values in order.
type mappingIndex struct {
	keys   map[string]int // key -> index of the key node in Content
	merges []*yaml.Node
}

func newTree(root *yaml.Node) *tree {
	return &tree{root: root, index: make(map[*yaml.Node]*mappingIndex), listLen: make(map[string]int)}
}

func (t *tree) indexOf(m *yaml.Node) *mappingIndex {
	if ix, ok := t.index[m]; ok {
		return ix
	}
	ix := &mappingIndex{keys: make(map[string]int, len(m.Content)/2)}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if isMergeKey(m.Content[i]) {
			ix.merges = append(ix.merges, m.Content[i+1])
			continue
		}
		if s, ok := keyString(m.Content[i]); ok {
			if _, dup := ix.keys[s]; !dup {
				ix.keys[s] = i
			}
		}
	}
	t.index[m] = ix
	return ix
}

// locate finds the node at a JSON pointer (as tokens) in the YAML tree. It
// returns the value node and, when the value is a field of a mapping, its
// key node. When the path does not exist, it returns the deepest node found
// and nil key.
func (t *tree) locate(tokens []string) (key, val *yaml.Node) {
	val = t.root
	for _, tok := range tokens {
		n := resolve(val)
		if n == nil {
			return nil, val
		}
		switch n.Kind {
		case yaml.MappingNode:
			k, v := t.findKey(n, tok, 0, nil)
			if v == nil {
				return nil, val
			}
			key, val = k, v
		case yaml.SequenceNode:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n.Content) {
				return nil, val
			}
			key, val = nil, n.Content[i]
		default:
			return nil, val
		}
	}
	return key, val
}

// findKey looks a key up in a mapping as the converter reads it: the first
// explicit occurrence, then the merged mappings in order. A mapping already
// searched (merged twice) is not searched again.
func (t *tree) findKey(m *yaml.Node, key string, depth int, seen map[*yaml.Node]bool) (k, v *yaml.Node) {
	if depth > maxDepth || seen[m] {
		return nil, nil
	}
	ix := t.indexOf(m)
	if i, ok := ix.keys[key]; ok {
		return m.Content[i], m.Content[i+1]
	}
	if len(ix.merges) == 0 {
		return nil, nil
	}
	if seen == nil {
		seen = make(map[*yaml.Node]bool)
	}
	seen[m] = true
	for _, mg := range ix.merges {
		sources := []*yaml.Node{mg}
		if r := resolve(mg); r.Kind == yaml.SequenceNode {
			sources = r.Content
		}
		for _, src := range sources {
			if r := resolve(src); r.Kind == yaml.MappingNode {
				if k, v := t.findKey(r, key, depth+1, seen); v != nil {
					return k, v
				}
			}
		}
	}
	return nil, nil
}

// pointer builds a JSON pointer (RFC 6901) from unescaped tokens.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		if strings.ContainsAny(t, "~/") {
			t = strings.ReplaceAll(t, "~", "~0")
			t = strings.ReplaceAll(t, "/", "~1")
		}
		b.WriteString(t)
	}
	return b.String()
}

// splitPointer is the inverse of pointer.
func splitPointer(p string) []string {
	if p == "" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, t := range parts {
		if strings.Contains(t, "~") {
			t = strings.ReplaceAll(t, "~1", "/")
			parts[i] = strings.ReplaceAll(t, "~0", "~")
		}
	}
	return parts
}

func fieldError(path string, n *yaml.Node, msg string) manent.FieldError {
	fe := manent.FieldError{Path: path, Message: msg}
	if n != nil {
		fe.Line, fe.Column = n.Line, n.Column
	}
	return fe
}
