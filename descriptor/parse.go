package descriptor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/yamlvalue"
)

// MaxSize is the largest descriptor accepted; larger input is refused before parsing.
const MaxSize = 1 << 20

// Default values the parser fills in when a field is absent.
const (
	// DefaultHealthExpect is the status code a health check expects.
	DefaultHealthExpect = 200
)

// CallbackEvents are the events a callback may ask for, in order; a
// callback without events gets all of them.
func CallbackEvents() []string { return []string{"started", "step", "finished"} }

// Parse parses and validates a descriptor. On invalid input it returns a
// *manent.Error with code EInvalid whose Fields list every problem (path,
// message, line, column), sorted by line and column; this includes input
// that is too large, empty, not UTF-8 text or not YAML. Any other error is
// an internal one.
//
// On success the descriptor has its defaults filled in: health checks expect
// DefaultHealthExpect, and callbacks without events get CallbackEvents.
func Parse(data []byte) (*Descriptor, error) {
	d, err := ParseAll(data)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// ParseAll is Parse that, when the descriptor's only problems are manent's
// rules between values the schema accepts — a step placed before or after
// a step that does not exist, a rollback.on naming none, a repeated step
// name — returns the descriptor too, beside Parse's error: a server can
// then run its own checks on it (plugins and their settings) and answer
// every problem at once (SPEC §2), merged by Merge. Such a descriptor must
// not be run. On any other problem the descriptor is nil, as with Parse.
func ParseAll(data []byte) (*Descriptor, error) {
	if len(data) > MaxSize {
		return nil, invalid(tooLarge())
	}
	if fe := checkText(data); fe != nil {
		return nil, invalid(*fe)
	}
	root, fe := parseYAML(data)
	if fe != nil {
		return nil, invalid(*fe)
	}

	errs := &errorList{}
	v, bad, fatal := convert(root, errs)
	if fatal != nil {
		return nil, invalid(*fatal)
	}
	doc, _ := v.(map[string]any)
	t := newTree(root)
	reported := make(map[string]bool)

	set, err := compiled()
	if err != nil {
		return nil, &manent.Error{Code: manent.EInternal, Message: "descriptor schema", Err: err}
	}
	trimLists(doc, set.raw, nil, t.listLen)
	if err := set.schema.Validate(doc); err != nil {
		schemaErrors(err, t, set, errs, func(path string) bool {
			if bad[path] {
				return false // the conversion already explained this value
			}
			reported[path] = true
			return true
		})
	}
	for p := range bad {
		reported[p] = true
	}

	shaped := len(errs.list) == 0
	ck := &checker{tree: t, reported: reported, errs: errs}
	ck.check(doc)
	if len(errs.list) > 0 {
		var d *Descriptor
		if shaped && !errs.more {
			d, _ = decode(doc)
		}
		return d, errs.invalid()
	}
	return decode(doc)
}

// Merge adds to own, the problems ParseAll found in data, more problems of
// the same descriptor (a server's checks on it), each placed at its path in
// data (Positions), and returns them all as one EInvalid error: sorted by
// position, without repeats, at most 100 (the last then says how many more
// there are). Only the first problems of more are placed when there are
// many: past 100 the rest are counted, not explained.
func Merge(data []byte, own *manent.Error, more []manent.FieldError) *manent.Error {
	if len(more) == 0 || len(own.Fields) >= maxErrors {
		return own
	}
	room, hidden := maxErrors-len(own.Fields), 0
	if len(more) > room {
		hidden = len(more) - (room - 1)
		more = more[:room-1]
	}
	more = slices.Clone(more)
	Positions(data, more)
	e := invalid(append(slices.Clone(own.Fields), more...)...)
	if hidden > 0 {
		e.Fields = append(e.Fields, manent.FieldError{
			Message: fmt.Sprintf("… and %d more problems not shown: fix these and validate again", hidden)})
		e.Message = fmt.Sprintf("descriptor is invalid: %d errors", len(e.Fields)-1+hidden)
	}
	return e
}

// ParseReader reads a descriptor (at most MaxSize bytes) and parses it.
func ParseReader(r io.Reader) (*Descriptor, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read descriptor: %w", err)
	}
	if len(data) > MaxSize {
		return nil, invalid(tooLarge())
	}
	return Parse(data)
}

func tooLarge() manent.FieldError {
	return manent.FieldError{Message: fmt.Sprintf("the descriptor is larger than 1 MiB (%d bytes)", MaxSize)}
}

// maxErrors is the most field errors returned. Past it Parse stops
// looking: the last one returned then says there are more.
const maxErrors = 100

// maxSteps is the most custom steps a descriptor may have (SPEC §11.1);
// the schema's steps.maxItems says the same.
const maxSteps = 200

// errorList collects the field errors of one Parse, at most maxErrors of
// them: past that it only remembers that there were more, so hostile input
// cannot make Parse build and explain thousands of errors. Every stage
// (conversion, schema, checks) stops adding once it is full.
type errorList struct {
	list []manent.FieldError
	more bool
}

func (l *errorList) full() bool { return len(l.list) >= maxErrors }

// add adds errors while there is room and reports whether there was.
func (l *errorList) add(errs ...manent.FieldError) bool {
	for _, e := range errs {
		if l.full() {
			l.more = true
			return false
		}
		l.list = append(l.list, e)
	}
	return true
}

// invalid is the EInvalid error of the collected field errors.
func (l *errorList) invalid() *manent.Error {
	if !l.more {
		return invalid(l.list...)
	}
	e := invalid(l.list...)
	out := e.Fields
	if len(out) >= maxErrors {
		out = out[:maxErrors-1]
	}
	last := out[len(out)-1]
	e.Fields = append(out, manent.FieldError{Line: last.Line, Column: last.Column,
		Message: "… and more errors not shown: fix these and validate again"})
	e.Message = fmt.Sprintf("descriptor is invalid: more than %d errors", maxErrors)
	return e
}

// maxPathLen is the longest JSON path shown in a field error; a longer one
// (a huge key) is cut.
const maxPathLen = 512

// invalid builds the EInvalid error from field errors: sorted by position,
// without repeats, at most maxErrors.
func invalid(errs ...manent.FieldError) *manent.Error {
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := errs[i], errs[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Message < b.Message
	})
	out := errs[:0]
	for i, e := range errs {
		if i > 0 && e == errs[i-1] {
			continue
		}
		if len(e.Path) > maxPathLen {
			e.Path = manent.ClipText(e.Path, maxPathLen)
		}
		if _, _, bad := firstControl(e.Path); bad {
			e.Path = EscapeControls(e.Path)
		}
		out = append(out, e)
	}
	total := len(out)
	if total > maxErrors {
		// Callers collect at most maxErrors; this is a safety net.
		first := out[maxErrors-1]
		out = append(out[:maxErrors-1], manent.FieldError{Line: first.Line, Column: first.Column,
			Message: fmt.Sprintf("%d more errors not shown", total-maxErrors+1)})
	}
	noun := "errors"
	if total == 1 {
		noun = "error"
	}
	return &manent.Error{
		Code:    manent.EInvalid,
		Message: fmt.Sprintf("descriptor is invalid: %d %s", total, noun),
		Fields:  out,
	}
}

// checkText refuses what is not UTF-8 text before the YAML parser sees it,
// with the position of the first bad byte.
func checkText(data []byte) *manent.FieldError {
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return &manent.FieldError{Line: line, Column: col,
				Message: fmt.Sprintf("the descriptor is not UTF-8 text: invalid byte 0x%02x (a binary file? save it as UTF-8)", data[i])}
		case r == 0:
			return &manent.FieldError{Line: line, Column: col,
				Message: "the descriptor is not text: it contains a NUL byte (a binary file, or UTF-16? save it as UTF-8)"}
		case (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f:
			return &manent.FieldError{Line: line, Column: col,
				Message: fmt.Sprintf("the descriptor contains the control character U+%04X, which YAML does not allow", r)}
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += size
	}
	return nil
}

// parseYAML reads exactly one YAML document whose top level is a mapping
// and returns that mapping.
func parseYAML(data []byte) (root *yaml.Node, fe *manent.FieldError) {
	defer func() {
		// The YAML parser is third-party code; whatever it does, Parse
		// must not panic.
		if r := recover(); r != nil {
			root, fe = nil, &manent.FieldError{Message: "invalid YAML: the parser failed on this input"}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &manent.FieldError{Message: "the descriptor is empty"}
		}
		return nil, syntaxError(data, err)
	}
	if isEmptyDocument(&doc) {
		return nil, &manent.FieldError{Message: "the descriptor is empty"}
	}
	top := yamlvalue.Resolve(doc.Content[0])
	if top.Kind != yaml.MappingNode {
		what := "a list"
		if top.Kind == yaml.ScalarNode {
			what = fmt.Sprintf("the value %q", top.Value)
		}
		return nil, &manent.FieldError{Line: top.Line, Column: top.Column,
			Message: fmt.Sprintf("the descriptor must be a mapping of fields (apiVersion: manent/v1, application: …), got %s", what)}
	}

	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, syntaxError(data, err)
	case !isEmptyDocument(&next):
		n := next.Content[0]
		return nil, &manent.FieldError{Line: n.Line, Column: n.Column,
			Message: "the descriptor must be a single YAML document; remove the second one (after ---)"}
	}
	return top, nil
}

// isEmptyDocument reports a document with no content or only a null.
func isEmptyDocument(doc *yaml.Node) bool {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return true
	}
	n := doc.Content[0]
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// syntaxError turns a YAML parser error into a FieldError at the culprit
// — the opening bracket or quote of what is not closed, else where the
// parser stopped — saying what to write instead (yamlvalue.ExplainSyntax).
// A position yaml.v3 does not know is 0, which means unknown (left out of
// the JSON, and not printed).
func syntaxError(data []byte, err error) *manent.FieldError {
	s := yamlvalue.ExplainSyntax(data, err)
	return &manent.FieldError{Line: s.Line, Column: s.Column, Message: "invalid YAML: " + s.Message}
}

// decode turns the validated generic value into a Descriptor and fills in
// the defaults.
func decode(doc map[string]any) (*Descriptor, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, &manent.Error{Code: manent.EInternal, Message: "encode descriptor", Err: err}
	}
	var d Descriptor
	if err := json.Unmarshal(b, &d); err != nil {
		// The schema and the checks accept only what decodes; this is a
		// safety net that still blames the input.
		return nil, invalid(manent.FieldError{Message: "cannot read the descriptor: " + err.Error()})
	}
	for i := range d.Health {
		if d.Health[i].Expect == 0 {
			d.Health[i].Expect = DefaultHealthExpect
		}
	}
	for i := range d.Callbacks {
		if len(d.Callbacks[i].Events) == 0 {
			d.Callbacks[i].Events = CallbackEvents()
		}
	}
	return &d, nil
}
