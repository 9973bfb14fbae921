// Package yamlvalue is manent's one reading of YAML: it converts a parsed
// tree (gopkg.in/yaml.v3 nodes) to the generic value JSON would give —
// map[string]any, []any, string, a number, bool and nil — and finds the
// node, hence the line and column, of any JSON pointer in that tree.
// Descriptors (descriptor.Parse) and environment configuration files
// (pkg/envconfig) both use it, so the two read the same YAML the same way:
// the same limits on depth and on values once aliases are expanded, merge
// keys (<<) with explicit keys winning, duplicate keys refused, timestamps
// kept as the text they were written as.
//
// It imports no package of this module.
package yamlvalue

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Numbers chooses how numbers are converted.
type Numbers int

const (
	// JSONNumbers converts numbers to json.Number, keeping integers exact.
	JSONNumbers Numbers = iota
	// Float64 converts numbers to float64, as encoding/json does into any.
	Float64
)

// Problem is one thing wrong with the input, found while converting it.
type Problem struct {
	// Tokens is where: the JSON pointer tokens of the value (a copy).
	Tokens []string
	// Node is the YAML node it is about, for its line and column.
	Node    *yaml.Node
	Message string
	// Fatal problems (too deep, too many values, an alias that contains
	// itself) stop the conversion; Convert then returns false.
	Fatal bool
	// BadValue marks a scalar that could not be converted: its written
	// text (or nil) stands in for it, so a later check of the value at
	// Tokens need not repeat the complaint.
	BadValue bool
	// OutOfRange marks a number beyond what every reader keeps exactly
	// (an integer beyond ±2^53, a number beyond a float). Message says to
	// quote it, which helps only where text is accepted: a reader that
	// knows the field wants a number in a range may say that instead.
	OutOfRange bool
}

// Options tune Convert.
type Options struct {
	// MaxDepth is how deeply mappings and lists may nest; MaxValues how
	// many values the input may expand to, once aliases are expanded.
	MaxDepth, MaxValues int
	Numbers             Numbers
	// Subject names the input in the message of the values limit ("the
	// descriptor"); empty: "more than N values".
	Subject string
	// Report is told each problem, in the order found. Required.
	Report func(Problem)
}

// Convert converts the tree at root (a value node, not a document node).
// It returns false when a fatal problem stopped it; non-fatal problems are
// reported and the conversion goes on.
func Convert(root *yaml.Node, opts Options) (any, bool) {
	c := &converter{opts: opts}
	return c.value(root, 0)
}

type converter struct {
	opts      Options
	values    int
	tokens    []string     // JSON pointer tokens of the value being converted
	expanding []*yaml.Node // alias targets being expanded, to detect cycles
}

func (c *converter) report(n *yaml.Node, fatal, bad bool, format string, args ...any) {
	c.opts.Report(Problem{Tokens: append([]string(nil), c.tokens...), Node: n,
		Message: fmt.Sprintf(format, args...), Fatal: fatal, BadValue: bad})
}

func (c *converter) errorAt(n *yaml.Node, format string, args ...any) {
	c.report(n, false, false, format, args...)
}

// value converts n, found at depth (the number of enclosing mappings and
// sequences). It returns false when the conversion must stop.
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

// count counts one more value and stops at MaxValues.
func (c *converter) count(n *yaml.Node) bool {
	c.values++
	if c.values > c.opts.MaxValues {
		what := "more than"
		if c.opts.Subject != "" {
			what = c.opts.Subject + " expands to more than"
		}
		c.report(n, true, false, "%s %d values (too many YAML aliases?)", what, c.opts.MaxValues)
		return false
	}
	return true
}

// enter checks a mapping or sequence about to be converted.
func (c *converter) enter(n *yaml.Node, depth int) bool {
	if depth >= c.opts.MaxDepth {
		c.report(n, true, false, "nested more than %d levels deep", c.opts.MaxDepth)
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
			c.report(n, true, false, "alias *%s refers to a value that contains it", n.Value)
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
		if IsMergeKey(k) {
			merges = append(merges, v)
			continue
		}
		key, ok := KeyString(k)
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
		if r := Resolve(m); r.Kind == yaml.SequenceNode {
			sources = r.Content
		}
		for _, src := range sources {
			if Resolve(src).Kind != yaml.MappingNode {
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
// they were written as, so a schema's date-time format applies to it and
// dates in parameters are not rewritten.
func (c *converter) scalar(n *yaml.Node) any {
	switch tag := n.ShortTag(); tag {
	case "!!str":
		if n.Style == 0 && numberSyntax.MatchString(n.Value) {
			// Plain 1e400 looks like a number but overflows a float, so
			// YAML resolves it as a string: the writer meant a number.
			c.outOfRange(n, "the number %s is out of range (quote it to pass it as a string)", n.Value)
		}
		return n.Value
	case "!!binary", "!!timestamp", "!":
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
			return c.number(n, json.Number(strconv.Itoa(x)))
		case int64:
			return c.number(n, json.Number(strconv.FormatInt(x, 10)))
		case uint64:
			return c.number(n, json.Number(strconv.FormatUint(x, 10)))
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

// numberSyntax is YAML 1.2's float syntax (core schema).
var numberSyntax = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

func (c *converter) badValue(n *yaml.Node, format string, args ...any) {
	c.report(n, false, true, format, args...)
}

// outOfRange reports n as a number out of range (Problem.OutOfRange).
func (c *converter) outOfRange(n *yaml.Node, format string, args ...any) {
	c.opts.Report(Problem{Tokens: append([]string(nil), c.tokens...), Node: n,
		Message: fmt.Sprintf(format, args...), BadValue: true, OutOfRange: true})
}

func (c *converter) float(n *yaml.Node, f float64) any {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		c.badValue(n, "must be a finite number, got %s", n.Value)
		return nil
	}
	return c.number(n, json.Number(strconv.FormatFloat(f, 'g', -1, 64)))
}

// maxExactInt is the largest integer every reader of a deploy keeps
// exactly: values travel as JSON numbers read into float64 (2^53).
const maxExactInt = 1 << 53

// number gives a number in the form Options.Numbers asks for. An integer
// beyond ±2^53 is refused: it would reach a step with other digits.
func (c *converter) number(n *yaml.Node, num json.Number) any {
	if tooLargeInt(n, num) {
		c.outOfRange(n, "the integer %s cannot be kept exactly (it is beyond ±2^53); quote it to pass it as a string", n.Value)
		return nil
	}
	if c.opts.Numbers != Float64 {
		return num
	}
	f, err := num.Float64()
	if err != nil || math.IsInf(f, 0) {
		c.badValue(n, "must be a finite number, got %s", n.Value)
		return nil
	}
	return f
}

// tooLargeInt says whether num, written as n, is an integer beyond ±2^53:
// its decimal form, or the text written (YAML resolves decimal digits too
// long for 64 bits to !!float), or an !!int beyond 64 bits.
func tooLargeInt(n *yaml.Node, num json.Number) bool {
	if InexactInteger(string(num)) || InexactInteger(n.Value) {
		return true
	}
	_, err := strconv.ParseInt(string(num), 10, 64)
	return err != nil && n.ShortTag() == "!!int"
}

// InexactInteger says whether text is a decimal integer (an optional sign,
// digits, YAML's "_" separators) beyond ±2^53: one that every reader of a
// deploy, holding numbers as 64-bit floats, would get with other digits.
func InexactInteger(text string) bool {
	digits := strings.TrimLeft(text, "+-")
	if digits == "" || len(text)-len(digits) > 1 {
		return false
	}
	for _, r := range digits {
		if (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	i, err := strconv.ParseInt(strings.ReplaceAll(text, "_", ""), 10, 64)
	return err != nil || i > maxExactInt || i < -maxExactInt
}

// IsMergeKey reports whether k is the merge key <<.
func IsMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge"
}

// KeyString returns the text of a mapping key, following an alias.
func KeyString(k *yaml.Node) (string, bool) {
	k = Resolve(k)
	if k.Kind != yaml.ScalarNode {
		return "", false
	}
	return k.Value, true
}

// Resolve follows aliases (an anchored node is never itself an alias, but
// the loop is bounded anyway). It returns nil for nil.
func Resolve(n *yaml.Node) *yaml.Node {
	for i := 0; i < 8 && n != nil && n.Kind == yaml.AliasNode && n.Alias != nil; i++ {
		n = n.Alias
	}
	return n
}
