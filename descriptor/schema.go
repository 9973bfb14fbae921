package descriptor

import (
	"bytes"
	_ "embed"
	"fmt"
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
