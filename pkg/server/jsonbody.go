package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/manent-io/manent/pkg/manent"
)

// jsonBody serves next only when the request's body, if it has one, says
// it is JSON: Content-Type application/json or a +json type, parameters
// allowed, its charset (if named) UTF-8. Anything else is a 415 naming
// what was sent and what is wanted. A cross-site form (enctype=text/plain)
// and a no-cors fetch are "simple requests" a browser sends without asking
// the server first, with a body that may parse as JSON: these routes read
// none of them. A request without a body passes whatever its headers.
func jsonBody(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			if detail := notJSONContentType(r.Header.Get("Content-Type")); detail != "" {
				writeStatus(w, http.StatusUnsupportedMediaType, detail)
				return
			}
		}
		next(w, r)
	}
}

// notJSONContentType says why a body of type ct is not read as JSON, or ""
// when it is.
func notJSONContentType(ct string) string {
	const want = "this route reads a JSON body; send it with Content-Type: application/json"
	if strings.TrimSpace(ct) == "" {
		return "no Content-Type: " + want
	}
	sent := "Content-Type " + manent.ClipText(ct, maxEchoed)
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))) {
		return sent + ": " + want
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return sent + ": the body must be UTF-8; send it with Content-Type: application/json (or charset=utf-8)"
	}
	return ""
}

// jsonUnmarshalStrict decodes a JSON body that checkJSONBody accepts,
// refusing unknown fields.
func jsonUnmarshalStrict(b []byte, v any) error {
	if err := checkJSONBody(b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return decodeError(dec.Decode(v))
}

// decodeError words encoding/json's refusal of a body checkJSONBody
// accepted in the body's terms, quoting no more of it than maxEchoed
// characters: an unknown field's name (encoding/json quotes it whole, so
// a 10 KiB key was a 10 KiB answer), or the field whose value has another
// JSON type ("wave" is a number, want a string — not Go's struct names).
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		what := "the body"
		if te.Field != "" {
			what = quote(manent.ClipText(te.Field, maxEchoed))
		}
		return fmt.Errorf("%s is %s, want %s", what, jsonKind(te.Value), jsonType(te.Type))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if n, uerr := strconv.Unquote(name); uerr == nil {
			name = n
		}
		return fmt.Errorf("unknown field %s", quote(manent.ClipText(name, maxEchoed)))
	}
	return errors.New(manent.ClipText(err.Error(), 4*maxEchoed))
}

// jsonKind names a JSON value as encoding/json's UnmarshalTypeError.Value
// gives it ("number", "object", "string 'x'", …).
func jsonKind(v string) string {
	kind, _, _ := strings.Cut(v, " ")
	switch kind {
	case "object", "array":
		return "an " + kind
	case "bool":
		return "true or false"
	default:
		return "a " + kind
	}
}

// jsonType names the JSON value a Go type reads.
func jsonType(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

// maxJSONDepth is the deepest nesting of a JSON body: an agent's snapshot,
// the deepest, nests 5 levels.
const maxJSONDepth = 32

// checkJSONBody refuses a JSON body whose meaning depends on who reads it,
// or that is not what it seems, saying what and where (1-based byte
// offsets): a byte-order mark, a byte that is not UTF-8 (encoding/json
// would read it as U+FFFD), a NUL (UTF-16), anything after the value, a
// key given twice in one object (encoding/json keeps the last, many
// proxies and languages the first: a gateway in front could check one
// value and manent act on the other), or nesting deeper than maxJSONDepth.
// It is linear in b.
func checkJSONBody(b []byte) error {
	if bytes.HasPrefix(b, []byte("\ufeff")) {
		return errors.New("the body begins with a byte-order mark (U+FEFF): send UTF-8 without one")
	}
	if !utf8.Valid(b) {
		return errors.New("the body is not UTF-8 text: " + invalidUTF8(string(b)))
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return fmt.Errorf("the body holds a NUL byte at byte %d (UTF-16? send UTF-8 JSON)", i+1)
	}
	if !json.Valid(b) {
		// Say why, in encoding/json's words for a syntax error (those
		// Decode gives), else what follows the first value.
		dec := json.NewDecoder(bytes.NewReader(b))
		var value json.RawMessage
		switch err := dec.Decode(&value); {
		case errors.Is(err, io.EOF):
			return errors.New("the body holds no JSON value: send a JSON object, or no body")
		case errors.Is(err, io.ErrUnexpectedEOF):
			return errors.New("the body ends inside its JSON value: send the whole object")
		case err != nil:
			return err
		}
		end := int(dec.InputOffset())
		i := bytes.IndexFunc(b[end:], func(r rune) bool { return r != ' ' && r != '\t' && r != '\n' && r != '\r' })
		return fmt.Errorf("the body goes on at byte %d after the JSON object: send one JSON object and nothing after it", end+i+1)
	}
	return checkKeys(b)
}

// jsonLevel is an array or object open while checkKeys scans.
type jsonLevel struct {
	object bool
	keys   [][]byte // the keys seen, searched linearly while few
	at     []int    // where each starts
	set    map[string]int
}

// add records key, starting at byte at, or returns where it was first.
func (l *jsonLevel) add(key []byte, at int) (int, bool) {
	if l.set == nil && len(l.keys) < 16 {
		for i, k := range l.keys {
			if bytes.Equal(k, key) {
				return l.at[i], true
			}
		}
		l.keys, l.at = append(l.keys, key), append(l.at, at)
		return 0, false
	}
	if l.set == nil {
		l.set = make(map[string]int, 2*len(l.keys))
		for i, k := range l.keys {
			l.set[string(k)] = l.at[i]
		}
	}
	if first, dup := l.set[string(key)]; dup {
		return first, true
	}
	l.set[string(key)] = at
	return 0, false
}

// checkKeys scans b, whitespace and one valid JSON value, for a key given
// twice in one object and for nesting deeper than maxJSONDepth. Keys are
// compared as they read, unescaped ("a" and "\u0061" are one key).
func checkKeys(b []byte) error {
	var stack []jsonLevel // reused: stack[:depth] are open
	depth, expectKey := 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '{', '[':
			if depth == maxJSONDepth {
				return fmt.Errorf("the body nests deeper than %d levels (at byte %d)", maxJSONDepth, i+1)
			}
			if depth == len(stack) {
				stack = append(stack, jsonLevel{})
			}
			l := &stack[depth]
			l.object, l.keys, l.at, l.set = c == '{', l.keys[:0], l.at[:0], nil
			depth++
			expectKey = c == '{'
		case '}', ']':
			depth--
			expectKey = false
		case ',':
			expectKey = stack[depth-1].object
		case '"':
			j, escaped := i+1, false
			for b[j] != '"' {
				if b[j] == '\\' {
					escaped = true
					j++
				}
				j++
			}
			if expectKey {
				key := b[i+1 : j]
				if escaped {
					var k string
					_ = json.Unmarshal(b[i:j+1], &k) // valid: Decode read it
					key = []byte(k)
				}
				if first, dup := stack[depth-1].add(key, i+1); dup {
					return fmt.Errorf("the key %q is given twice (at byte %d and at byte %d): give it once",
						manent.ClipText(string(key), maxEchoed), first, i+1)
				}
				expectKey = false
			}
			i = j
		}
	}
	return nil
}
