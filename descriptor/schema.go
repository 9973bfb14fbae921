package descriptor

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed schema.json
var schemaJSON []byte

// compiled is the embedded schema compiled once, on first use.
var compiled = sync.OnceValues(compileSchema)

// Schema returns the embedded JSON Schema (draft 2020-12) of the descriptor,
// as printed by `manent schema` for editors. The caller may keep the slice;
// it is a copy.
func Schema() []byte { return bytes.Clone(schemaJSON) }

// schemaSet is the compiled schema plus the raw document, which the error
// messages read to suggest field names.
type schemaSet struct {
	schema *jsonschema.Schema
	raw    any
}

func compileSchema() (*schemaSet, error) {
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("read embedded schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	const url = "schema.json"
	if err := c.AddResource(url, raw); err != nil {
		return nil, fmt.Errorf("add embedded schema: %w", err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("compile embedded schema: %w", err)
	}
	return &schemaSet{schema: sch, raw: raw}, nil
}

// trimLists cuts every list of v longer than its schema's maxItems down to
// maxItems+1 items, so that the validator does not explain thousands of
// items of a list it refuses anyway (a hostile 1 MiB list of bad items).
// It records the length each cut list had, by JSON pointer, for the
// message, and returns v with its lists cut (maps are changed in place:
// a descriptor with a cut list is invalid, so nothing else uses them).
func trimLists(v any, sch any, path []string, lengths map[string]int) any {
	s, _ := sch.(map[string]any)
	if s == nil {
		return v
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for k, x := range v {
			if ps, ok := props[k]; ok {
				v[k] = trimLists(x, ps, append(path, k), lengths)
			}
		}
		return v
	case []any:
		if limit, ok := s["maxItems"].(json.Number); ok {
			if n, err := limit.Int64(); err == nil && int64(len(v)) > n+1 {
				lengths[pointer(path)] = len(v)
				v = v[:n+1]
			}
		}
		for i, x := range v {
			v[i] = trimLists(x, s["items"], append(path, strconv.Itoa(i)), lengths)
		}
		return v
	}
	return v
}
