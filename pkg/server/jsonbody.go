package server

import (
	"bytes"
	"encoding/json"
)

// jsonUnmarshalStrict decodes one JSON document, refusing unknown fields.
func jsonUnmarshalStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
