package envconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Limits on one configuration document, so a broken or hostile file cannot
// make a deploy check slow or hungry.
const (
	maxSize   = 1 << 20 // bytes of one file or HTTP answer
	maxDepth  = 64      // nested mappings and lists
	maxValues = 100_000 // values once YAML aliases are expanded
)

// yamlDoc is a YAML file converted to a generic value, with the line of
// every value by JSON pointer, so problems found later point at the file.
type yamlDoc struct {
	value any
	lines map[string]int
}

// line returns the line of the value at path, or of its nearest ancestor
// found in the file; 0 when none is.
func (d *yamlDoc) line(path []string) int {
	for n := len(path); n >= 0; n-- {
		if l, ok := d.lines[pointer(path[:n])]; ok {
			return l
		}
	}
	return 0
}

// has reports whether the file sets the value at path.
func (d *yamlDoc) has(path []string) bool {
	_, ok := d.lines[pointer(path)]
	return ok && len(path) > 0
}

// yamlLine matches the position yaml.v3 puts in its messages.
var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// parseYAML converts a YAML file (the first document; an empty file is a
// null value) to a generic value: mappings with string keys, lists,
// strings, float64, bool and nil. Dates and times stay the text they were
// written as. The error lists every problem as "name:line: message".
func parseYAML(name string, data []byte) (*yamlDoc, error) {
	if len(data) > maxSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxSize)
	}
	root, err := decodeNode(name, data)
	if err != nil {
		return nil, err
	}
	doc := &yamlDoc{lines: map[string]int{}}
	if root == nil {
		return doc, nil
	}
	c := &converter{doc: doc}
	v, ok := c.value(root, 0)
	if len(c.errs) > 0 || !ok {
		var msgs []string
		for _, e := range c.errs {
			msgs = append(msgs, fmt.Sprintf("%s:%d: %s", name, e.line, e.msg))
		}
		return nil, fmt.Errorf("%s", strings.Join(msgs, "; "))
	}
	doc.value = v
	return doc, nil
}

// decodeNode parses the one YAML document of data; nil when it is empty.
func decodeNode(name string, data []byte) (root *yaml.Node, err error) {
	defer func() {
		// The YAML parser is third-party code: whatever it does, a broken
		// file must not take the server down.
		if r := recover(); r != nil {
			root, err = nil, fmt.Errorf("%s: invalid YAML: the parser failed on this input", name)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc, next yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil
	} else if err != nil {
		return nil, yamlError(name, err)
	}
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, yamlError(name, err)
	case len(next.Content) > 0:
		return nil, fmt.Errorf("%s:%d: a configuration file holds one YAML document; remove the second one (after ---)", name, next.Content[0].Line)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// yamlError puts the file name before yaml.v3's message and line.
func yamlError(name string, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s:%s: %s", name, m[1], strings.TrimPrefix(msg, m[0]))
	}
	return fmt.Errorf("%s: %s", name, strings.TrimPrefix(msg, "yaml: "))
}

type lineError struct {
	line int
	msg  string
}

// converter turns a yaml.Node tree into a generic value.
type converter struct {
	doc       *yamlDoc
	tokens    []string
	values    int
	expanding []*yaml.Node // alias targets being expanded, to detect cycles
	errs      []lineError
}

func (c *converter) errorf(n *yaml.Node, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if len(c.tokens) > 0 {
		msg = pointer(c.tokens) + ": " + msg
	}
	c.errs = append(c.errs, lineError{line: n.Line, msg: msg})
}

// value converts n at depth; false means stop (the error is recorded).
func (c *converter) value(n *yaml.Node, depth int) (any, bool) {
	if _, seen := c.doc.lines[pointer(c.tokens)]; !seen {
		c.doc.lines[pointer(c.tokens)] = n.Line
	}
	c.values++
	if c.values > maxValues {
		c.errorf(n, "more than %d values (too many YAML aliases?)", maxValues)
		return nil, false
	}
	if depth > maxDepth {
		c.errorf(n, "nested more than %d levels deep", maxDepth)
		return nil, false
	}
	switch n.Kind {
	case yaml.AliasNode:
		for _, e := range c.expanding {
			if e == n.Alias {
				c.errorf(n, "the alias *%s contains itself", n.Value)
				return nil, false
			}
		}
		c.expanding = append(c.expanding, n.Alias)
		defer func() { c.expanding = c.expanding[:len(c.expanding)-1] }()
		return c.value(n.Alias, depth)
	case yaml.ScalarNode:
		return c.scalar(n), true
	case yaml.SequenceNode:
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
		return c.mapping(n, depth)
	}
	c.errorf(n, "unexpected YAML node")
	return nil, false
}

func (c *converter) mapping(n *yaml.Node, depth int) (any, bool) {
	out := make(map[string]any, len(n.Content)/2)
	seen := make(map[string]int, len(n.Content)/2)
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			c.errorf(k, "a key must be a plain value, not a list or a mapping")
			continue
		}
		key := k.Value
		if first, dup := seen[key]; dup {
			c.errorf(k, "duplicate key %q (first at line %d)", key, first)
			continue
		}
		seen[key] = k.Line
		c.tokens = append(c.tokens, key)
		c.doc.lines[pointer(c.tokens)] = k.Line
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
		if m.Kind == yaml.SequenceNode {
			sources = m.Content
		}
		for _, src := range sources {
			v, ok := c.value(src, depth)
			if !ok {
				return nil, false
			}
			mv, isMap := v.(map[string]any)
			if !isMap {
				c.errorf(src, "a merge (<<) takes a mapping or a list of mappings")
				continue
			}
			for k, x := range mv {
				if _, set := out[k]; !set {
					out[k] = x
				}
			}
		}
	}
	return out, true
}

func (c *converter) scalar(n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			c.errorf(n, "not a valid boolean: %q", n.Value)
		}
		return b
	case "!!int", "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			c.errorf(n, "not a valid number: %q", n.Value)
			return nil
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			c.errorf(n, "must be a finite number, got %s", n.Value)
			return nil
		}
		return f
	case "!!str", "!!timestamp", "!":
		return n.Value
	default:
		c.errorf(n, "unsupported YAML tag %q", n.Tag)
		return nil
	}
}
