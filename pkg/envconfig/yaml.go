package envconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/manent-io/manent/pkg/yamlvalue"
)

// Limits on one configuration document, so a broken or hostile file cannot
// make a deploy check slow or hungry.
const (
	maxSize   = 1 << 20 // bytes of one file or HTTP answer
	maxDepth  = 64      // nested mappings and lists
	maxValues = 100_000 // values once YAML aliases are expanded
)

// yamlDoc is a YAML file converted to a generic value, with its tree, so
// problems found later point at the line in the file.
type yamlDoc struct {
	value any
	tree  *yamlvalue.Tree
}

// line returns the line of the value at path, or of its nearest ancestor
// the file sets: the line of its key when it is a field of a mapping; 0
// when the file sets none.
func (d *yamlDoc) line(path []string) int {
	for n := len(path); n >= 0; n-- {
		if n > 0 && !d.has(path[:n]) {
			continue
		}
		if d.tree == nil {
			return 0
		}
		key, val := d.tree.Locate(path[:n])
		switch {
		case key != nil:
			return key.Line
		case val != nil:
			return val.Line
		}
		return 0
	}
	return 0
}

// has reports whether the file sets the value at path (directly, through
// an alias or a merge).
func (d *yamlDoc) has(path []string) bool {
	if len(path) == 0 || d.tree == nil {
		return false
	}
	v := d.value
	for _, tok := range path {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[tok]
			if !ok {
				return false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return false
			}
			v = x[i]
		default:
			return false
		}
	}
	return true
}

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
	doc := &yamlDoc{}
	if root == nil {
		return doc, nil
	}
	var errs []string
	v, ok := yamlvalue.Convert(root, yamlvalue.Options{
		MaxDepth: maxDepth, MaxValues: maxValues, Numbers: yamlvalue.Float64,
		Report: func(p yamlvalue.Problem) {
			msg := p.Message
			if len(p.Tokens) > 0 {
				msg = yamlvalue.Pointer(p.Tokens) + ": " + msg
			}
			errs = append(errs, fmt.Sprintf("%s:%d: %s", name, p.Node.Line, msg))
		},
	})
	if len(errs) > 0 || !ok {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	doc.value, doc.tree = v, yamlvalue.NewTree(root)
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
		return nil, yamlError(name, data, err)
	}
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, yamlError(name, data, err)
	case len(next.Content) > 0:
		return nil, fmt.Errorf("%s:%d: a configuration file holds one YAML document; remove the second one (after ---)", name, next.Content[0].Line)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// yamlError is a syntax error of the file name, data, at its culprit's
// line and column (yamlvalue.ExplainSyntax): "name:line:column: invalid
// YAML: …", or "name: invalid YAML: …" when the parser did not say where.
func yamlError(name string, data []byte, err error) error {
	s := yamlvalue.ExplainSyntax(data, err)
	if s.Line == 0 {
		return fmt.Errorf("%s: invalid YAML: %s", name, s.Message)
	}
	return fmt.Errorf("%s:%d:%d: invalid YAML: %s", name, s.Line, s.Column, s.Message)
}
