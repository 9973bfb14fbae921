package descriptor

import "github.com/manent-io/manent/pkg/manent"

// MaxSize is the largest descriptor accepted; larger input is refused before parsing.
const MaxSize = 1 << 20

// Parse parses and validates a descriptor. On invalid input it returns a
// *manent.Error with code EInvalid whose Fields list every problem (path,
// message, line, column).
//
// TODO(foundation): schema validation and semantic checks are being written.
func Parse(data []byte) (*Descriptor, error) {
	_ = manent.EInvalid
	panic("descriptor.Parse: not implemented yet")
}

// Schema returns the embedded JSON Schema (draft 2020-12).
func Schema() []byte { panic("descriptor.Schema: not implemented yet") }
