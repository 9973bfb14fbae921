package yamlvalue

import (
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxMergeDepth bounds how deeply Locate follows merges (<<) into merges.
const maxMergeDepth = 64

// Locate finds the node at path (mapping keys, and list indexes as decimal
// text) in a YAML tree (a document node or its content) the way Convert
// reads it: aliases followed, a key's first explicit occurrence, then the
// merged (<<) mappings in order. It returns the value node and, when the
// value is a field of a mapping, its key node; when path does not exist,
// the deepest node found on the way and a nil key. It is the one conversion
// from a path to a position (Line, Column) in YAML. For many lookups in one
// tree, use a Tree (same answers).
func Locate(root *yaml.Node, path []string) (key, val *yaml.Node) {
	return NewTree(root).Locate(path)
}

// Tree is a YAML tree with an index of its mappings' keys, built on first
// use, so that finding the nodes of many paths is linear in the input.
type Tree struct {
	root  *yaml.Node
	index map[*yaml.Node]*mappingIndex
}

// mappingIndex is one mapping's explicit keys (first occurrence, as the
// converter reads them) and its merge (<<) values in order.
type mappingIndex struct {
	keys   map[string]int // key -> index of the key node in Content
	merges []*yaml.Node
}

// NewTree indexes the tree at root (a document node or its content).
func NewTree(root *yaml.Node) *Tree {
	if root != nil && root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	return &Tree{root: root, index: make(map[*yaml.Node]*mappingIndex)}
}

func (t *Tree) indexOf(m *yaml.Node) *mappingIndex {
	if ix, ok := t.index[m]; ok {
		return ix
	}
	ix := &mappingIndex{keys: make(map[string]int, len(m.Content)/2)}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if IsMergeKey(m.Content[i]) {
			ix.merges = append(ix.merges, m.Content[i+1])
			continue
		}
		if s, ok := KeyString(m.Content[i]); ok {
			if _, dup := ix.keys[s]; !dup {
				ix.keys[s] = i
			}
		}
	}
	t.index[m] = ix
	return ix
}

// Locate finds the node at a JSON pointer (as tokens), as the function
// Locate does.
func (t *Tree) Locate(tokens []string) (key, val *yaml.Node) {
	key, val, _ = t.Find(tokens)
	return key, val
}

// Find is Locate that also says whether the pointer's node exists: when
// it does not, key is nil and val the nearest node on its way.
func (t *Tree) Find(tokens []string) (key, val *yaml.Node, found bool) {
	val = t.root
	for _, tok := range tokens {
		n := Resolve(val)
		if n == nil {
			return nil, val, false
		}
		switch n.Kind {
		case yaml.MappingNode:
			k, v := t.findKey(n, tok, 0, nil)
			if v == nil {
				return nil, val, false
			}
			key, val = k, v
		case yaml.SequenceNode:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n.Content) {
				return nil, val, false
			}
			key, val = nil, n.Content[i]
		default:
			return nil, val, false
		}
	}
	return key, val, true
}

// Field finds the field name of the mapping m (aliases followed) as Locate
// does: the key and value nodes, nil when m is not a mapping or has no such
// field.
func (t *Tree) Field(m *yaml.Node, name string) (key, val *yaml.Node) {
	m = Resolve(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, nil
	}
	return t.findKey(m, name, 0, nil)
}

// findKey looks a key up in a mapping as the converter reads it: the first
// explicit occurrence, then the merged mappings in order. A mapping already
// searched (merged twice) is not searched again.
func (t *Tree) findKey(m *yaml.Node, key string, depth int, seen map[*yaml.Node]bool) (k, v *yaml.Node) {
	if depth > maxMergeDepth || seen[m] {
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
		if r := Resolve(mg); r.Kind == yaml.SequenceNode {
			sources = r.Content
		}
		for _, src := range sources {
			if r := Resolve(src); r.Kind == yaml.MappingNode {
				if k, v := t.findKey(r, key, depth+1, seen); v != nil {
					return k, v
				}
			}
		}
	}
	return nil, nil
}

// Pointer builds a JSON pointer (RFC 6901) from unescaped tokens:
// /parameters/a~1b.
func Pointer(tokens []string) string {
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

// SplitPointer is the inverse of Pointer.
func SplitPointer(p string) []string {
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
