package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/itchyny/gojq"
	"gopkg.in/yaml.v3"
)

// Format is the value of -o/--output.
type Format string

// Output formats.
const (
	FormatTable Format = "table"
	FormatJSON  Format = "json"
	FormatYAML  Format = "yaml"
)

// formatValue is the pflag.Value behind -o: a wrong value is refused while
// flags are parsed, so it is a usage error for every command.
type formatValue struct {
	f *Format
	// jq, when set, is told that -o was given explicitly (see jqFlag).
	jq *jqFlag
}

func (v formatValue) String() string {
	if v.f == nil || *v.f == "" {
		return string(FormatTable)
	}
	return string(*v.f)
}

func (v formatValue) Set(s string) error {
	switch f := Format(s); f {
	case FormatTable, FormatJSON, FormatYAML:
		*v.f = f
		if v.jq != nil {
			v.jq.formatSet = true
			if v.jq.code != nil {
				return v.jq.conflict()
			}
		}
		return nil
	}
	return fmt.Errorf("must be one of table, json, yaml")
}

func (v formatValue) Type() string { return "format" }

// Exporter writes one value as JSON or YAML: the one path by which every
// command prints machine-readable output. JSON is indented; YAML is the same
// document as the JSON (same field names and order), converted by yaml.v3.
type Exporter struct {
	format Format
	// jq filters the JSON document (--jq); nil prints it whole.
	jq *gojq.Code
}

// NewExporter returns the exporter for format, or nil for table output.
func NewExporter(format Format) *Exporter {
	if format == FormatJSON || format == FormatYAML {
		return &Exporter{format: format}
	}
	return nil
}

// newJQExporter returns the exporter of --jq: JSON filtered through code.
func newJQExporter(code *gojq.Code) *Exporter {
	return &Exporter{format: FormatJSON, jq: code}
}

// Format returns the exporter's format.
func (e *Exporter) Format() Format { return e.format }

// Write writes v to w.
func (e *Exporter) Write(w io.Writer, v any) error { return e.write(w, v, false) }

// WriteStream writes one item of a stream (logs -f): a compact JSON object
// per line, or one YAML document per item.
func (e *Exporter) WriteStream(w io.Writer, v any) error { return e.write(w, v, true) }

// write writes v through the jq program, or as JSON (indented, compact in
// a stream), or as YAML (a document of its own in a stream).
func (e *Exporter) write(w io.Writer, v any, stream bool) error {
	if e.jq != nil {
		return writeJQ(w, e.jq, v)
	}
	data, err := marshalJSON(v, !stream)
	if err != nil {
		return err
	}
	if e.format == FormatJSON {
		_, err = w.Write(data)
		return err
	}
	out, err := jsonToYAML(data)
	if err != nil {
		return err
	}
	if stream {
		out = append([]byte("---\n"), out...)
	}
	_, err = w.Write(out)
	return err
}

func marshalJSON(v any, indent bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode output: %w", err)
	}
	return buf.Bytes(), nil
}

// compactJSON renders raw JSON on one line, for table cells.
func compactJSON(raw []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return strings.TrimSpace(string(raw))
	}
	return buf.String()
}

// jsonToYAML re-encodes a JSON document as block-style YAML. JSON is YAML,
// so yaml.v3 reads it into a node tree that keeps key order and scalar tags;
// clearing the flow and quoting styles lets the encoder choose block style
// and quote only the strings that need it ("1.4", "true", "").
//
// YAML refuses some characters JSON carries raw (C1 controls, bidi
// overrides in the server's text): they are escaped as \uNNNN first, which
// both read as the same string.
func jsonToYAML(data []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(escapeJSONControls(data), &doc); err != nil {
		return nil, fmt.Errorf("convert output to yaml: %w", err)
	}
	clearStyle(&doc)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	return buf.Bytes(), nil
}

func clearStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		clearStyle(c)
	}
}

// escapeJSONControls rewrites the characters sanitize calls dangerous as
// \uNNNN escapes. In a JSON document they can only be inside strings, where
// the escape means the same character.
func escapeJSONControls(data []byte) []byte {
	if isClean(string(data), true) {
		return data
	}
	var b bytes.Buffer
	for _, r := range string(data) {
		if dangerous(r, true) {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.Bytes()
}
