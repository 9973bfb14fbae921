package descriptor

import (
	"cmp"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"gopkg.in/yaml.v3"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/suggest"
	"github.com/manent-io/manent/pkg/yamlvalue"
)

// schemaErrors adds to errs one FieldError per leaf cause of a validation
// error of the JSON Schema, with the YAML position of the value concerned,
// until errs is full. keep says whether an error at a path is reported
// (and records that it is).
func schemaErrors(err error, t *tree, set *schemaSet, errs *errorList, keep func(path string) bool) {
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		errs.add(manent.FieldError{Message: err.Error()})
		return
	}
	emit := func(fe manent.FieldError) bool {
		if errs.full() {
			errs.more = true
			return false
		}
		if keep(fe.Path) {
			errs.add(fe)
		}
		return true
	}
	// The leaves in the order of the input, so that the errors reported
	// are the first ones (and the same ones each time); an unknown field
	// is a leaf of its own.
	type leaf struct {
		e         *jsonschema.ValidationError
		name      string // the unknown field of an AdditionalProperties leaf
		line, col int
		seq       int // order in the tree, for a stable sort
	}
	var leaves []leaf
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		if k, ok := e.ErrorKind.(*kind.AdditionalProperties); ok {
			_, m := t.locate(e.InstanceLocation)
			for _, name := range k.Properties {
				l := leaf{e: e, name: name, seq: len(leaves)}
				if key, _ := t.Field(m, name); key != nil {
					l.line, l.col = key.Line, key.Column
				}
				leaves = append(leaves, l)
			}
			return
		}
		l := leaf{e: e, seq: len(leaves)}
		if _, n := t.locate(e.InstanceLocation); n != nil {
			l.line, l.col = n.Line, n.Column
		}
		leaves = append(leaves, l)
	}
	walk(verr)
	slices.SortFunc(leaves, func(a, b leaf) int {
		return cmp.Or(cmp.Compare(a.line, b.line), cmp.Compare(a.col, b.col), cmp.Compare(a.seq, b.seq))
	})
	for _, l := range leaves {
		if !leafErrors(l.e, l.name, t, set, emit) {
			return
		}
	}
}

// leafErrors explains one leaf of the validation error tree through emit
// (of an AdditionalProperties leaf, the unknown field name only), and
// reports whether emit wants more.
func leafErrors(e *jsonschema.ValidationError, name string, t *tree, set *schemaSet, emit func(manent.FieldError) bool) bool {
	loc := e.InstanceLocation
	at := func(msg string) bool {
		_, n := t.locate(loc)
		return emit(fieldError(pointer(loc), n, msg))
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		// The field is missing: point at the mapping that lacks it.
		_, parent := t.locate(loc)
		for _, name := range k.Missing {
			if !emit(fieldError(pointer(append(slices.Clip(loc), name)), parent,
				fmt.Sprintf("missing required field %q", name))) {
				return false
			}
		}
		return true
	case *kind.AdditionalProperties:
		path := append(slices.Clip(loc), name)
		key, val := t.locate(path)
		if key == nil {
			key = val
		}
		msg := fmt.Sprintf("unknown field %q", clip(name))
		if s := suggest.Closest(name, propertiesAt(set, e.SchemaURL)); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return emit(fieldError(pointer(path), key, msg))
	case *kind.Type:
		_, n := t.locate(loc)
		msg := fmt.Sprintf("must be %s, got %s", typeNames(k.Want), typeName(k.Got, n))
		if slices.Contains(k.Want, "string") && n != nil && yamlvalue.Resolve(n).Kind == yaml.ScalarNode &&
			(k.Got == "number" || k.Got == "integer" || k.Got == "boolean") {
			msg += fmt.Sprintf(": quote it (%q) to keep it as text", clip(yamlvalue.Resolve(n).Value))
		}
		if k.Got == "string" && n != nil && yamlvalue.Resolve(n).Kind == yaml.ScalarNode && unquoted(yamlvalue.Resolve(n).Value, k.Want) {
			msg += ": remove the quotes"
		}
		return at(msg)
	case *kind.Const:
		return at(fmt.Sprintf("must be %s, got %s", display(k.Want), display(k.Got)))
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = display(w)
		}
		return at(fmt.Sprintf("must be one of %s, got %s", strings.Join(want, ", "), display(k.Got)))
	case *kind.Pattern:
		msg := "must match " + k.Want
		if h := patternHint(k.Want); h != "" {
			msg += " (" + h + ")"
		}
		return at(fmt.Sprintf("%s: %q", msg, clip(k.Got)) + notASCII(k.Want, k.Got) + pathNotURL(k.Want, k.Got))
	case *kind.Format:
		if k.Want == "date-time" {
			return at(fmt.Sprintf("must be an RFC 3339 date-time with a time zone, e.g. 2026-12-24T06:00:00Z: %s", display(k.Got)))
		}
		return at(fmt.Sprintf("must be a valid %s: %s", k.Want, display(k.Got)))
	case *kind.Minimum:
		return at(fmt.Sprintf("must be at least %s, got %s", rat(k.Want), rat(k.Got)))
	case *kind.Maximum:
		return at(fmt.Sprintf("must be at most %s, got %s", rat(k.Want), rat(k.Got)))
	case *kind.ExclusiveMinimum:
		return at(fmt.Sprintf("must be more than %s, got %s", rat(k.Want), rat(k.Got)))
	case *kind.ExclusiveMaximum:
		return at(fmt.Sprintf("must be less than %s, got %s", rat(k.Want), rat(k.Got)))
	case *kind.MinLength:
		if k.Want == 1 {
			return at("must not be empty")
		}
		return at(fmt.Sprintf("must be at least %d characters long, got %d", k.Want, k.Got))
	case *kind.MaxLength:
		return at(fmt.Sprintf("must be at most %d characters long, got %d", k.Want, k.Got))
	case *kind.MinItems:
		if k.Want == 1 {
			return at("must not be an empty list")
		}
		return at(fmt.Sprintf("must have at least %d items, got %d", k.Want, k.Got))
	case *kind.MaxItems:
		got := k.Got
		if n, ok := t.listLen[pointer(loc)]; ok {
			got = n // the list was cut before validation
		}
		return at(fmt.Sprintf("must have at most %d items, got %d", k.Want, got))
	case *kind.UniqueItems:
		i, j := k.Duplicates[0], k.Duplicates[1]
		path := append(slices.Clip(loc), fmt.Sprint(j))
		_, n := t.locate(path)
		_, first := t.locate(append(slices.Clip(loc), fmt.Sprint(i)))
		msg := "duplicate item"
		if v := yamlvalue.Resolve(n); v != nil && v.Kind == yaml.ScalarNode {
			msg = fmt.Sprintf("duplicate item %q", clip(v.Value))
		}
		if first != nil {
			msg += fmt.Sprintf(" (first at line %d)", first.Line)
		}
		return emit(fieldError(pointer(path), n, msg))
	case *kind.MinProperties:
		return at(fmt.Sprintf("must have at least %d fields", k.Want))
	case *kind.MaxProperties:
		return at(fmt.Sprintf("must have at most %d fields", k.Want))
	default:
		return at(e.ErrorKind.LocalizedString(message.NewPrinter(language.English)))
	}
}

// maxQuoted is the most bytes of the input quoted in one message.
const maxQuoted = 64

// clip shortens text of the input quoted in a message (a 1 MiB value is
// refused with a message of a line).
func clip(s string) string { return manent.ClipText(s, maxQuoted) }

// unquoted reports whether text would have the wanted type without quotes.
func unquoted(text string, want []string) bool {
	if _, err := strconv.ParseInt(text, 10, 64); err == nil {
		return slices.Contains(want, "integer") || slices.Contains(want, "number")
	}
	if _, err := strconv.ParseFloat(text, 64); err == nil {
		return slices.Contains(want, "number")
	}
	return (text == "true" || text == "false") && slices.Contains(want, "boolean")
}

// notASCII names the first character of text that is not ASCII, when the
// pattern allows ASCII only (names, digests): a Cyrillic "а" looks like
// "a" in the quoted text, and a right-to-left override is not seen at all.
func notASCII(pattern, text string) string {
	if !strings.HasPrefix(pattern, "^[a-z0-9]") && !strings.HasPrefix(pattern, "^[0-9a-f]") {
		return ""
	}
	i := 0
	for _, r := range text {
		i++
		if r <= unicode.MaxASCII {
			continue
		}
		what := "which is not ASCII"
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			what += " (a lookalike of a Latin letter? retype it)"
		case !unicode.IsGraphic(r) || unicode.Is(unicode.Cf, r) || unicode.IsSpace(r):
			what += " (an invisible or formatting character? delete it)"
		}
		return fmt.Sprintf(" has %U at character %d, %s", r, i, what)
	}
	return ""
}

// patternHint explains the schema's patterns in words.
func patternHint(p string) string {
	switch p {
	case "^[a-z0-9][a-z0-9-]{0,62}$":
		return NameRule
	case "^[a-z0-9][a-z0-9:_-]{0,62}$":
		return `lowercase letters, digits, ":", "_" and "-", starting with a letter or digit, at most 63 characters`
	case "^[a-z0-9][a-z0-9-]*$":
		return `lowercase letters, digits and "-", starting with a letter or digit`
	case `^(https?|file)://\S+$`:
		return "an http://, https:// or file:// URL"
	case `^https?://\S+$`:
		return "an http:// or https:// URL"
	case "^[0-9a-f]{64}$":
		return "64 lowercase hex digits"
	case `^[^\x00-\x1f\x7f]+$`:
		return "one line of text without control characters"
	case "^(env|file):.+$":
		return "env:VARIABLE or file:/path"
	case `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`:
		return `a duration such as "30s", "5m" or "1h30m"`
	}
	return ""
}

// pathNotURL says what to write instead when a file path stands where
// artifact.url wants a URL: the server reads a file:// artifact on its own
// machine, so only an absolute path means something there.
func pathNotURL(pattern, text string) string {
	if pattern != `^(https?|file)://\S+$` || strings.Contains(text, "://") || text == "" {
		return ""
	}
	if strings.HasPrefix(text, "/") && !strings.ContainsAny(text, " \t") {
		return fmt.Sprintf("; a file on the server's machine is written file://%s", clip(text))
	}
	return "; a file on the server's machine is written with its absolute path, file:///path/to/artifact.tar.gz (the server does not read paths relative to deploy.yml)"
}

// typeNames says the JSON Schema types in YAML words.
func typeNames(types []string) string {
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = typeName(t, nil)
	}
	return strings.Join(names, " or ")
}

func typeName(t string, n *yaml.Node) string {
	switch t {
	case "object":
		return "a mapping"
	case "array":
		return "a list"
	case "string":
		return "a string"
	case "integer":
		return "an integer"
	case "number":
		return "a number"
	case "boolean":
		return "true or false"
	case "null":
		if n != nil && yamlvalue.Resolve(n).Kind == yaml.ScalarNode && yamlvalue.Resolve(n).Value != "" && yamlvalue.Resolve(n).Value != "~" {
			return clip(yamlvalue.Resolve(n).Value)
		}
		return "nothing"
	}
	return t
}

// display writes a JSON value as it appears in messages.
func display(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", clip(v))
	case nil:
		return "nothing"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprint(v)
}

func rat(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return fmt.Sprint(f)
}

// propertiesAt returns the property names a schema location (an absolute
// schema URL whose fragment is a JSON pointer into the embedded schema)
// allows, sorted.
func propertiesAt(set *schemaSet, schemaURL string) []string {
	if set == nil {
		return nil
	}
	_, frag, _ := strings.Cut(schemaURL, "#")
	m, _ := rawAt(set.raw, frag).(map[string]any)
	props, _ := m["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
