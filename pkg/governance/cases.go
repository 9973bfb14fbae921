package governance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Case is one row of a table of policy tests (`manent policy test --cases`):
// an input and what the decision must say about it.
type Case struct {
	Name   string `json:"name"`
	Input  Input  `json:"input"`
	Expect Expect `json:"expect"`
	// Line is where the case starts in its file.
	Line int `json:"-"`
}

// Expect is what a case checks; whatever it leaves out is not checked.
type Expect struct {
	Allowed *bool `json:"allowed,omitempty"`
	// Deny: each entry must be a substring of one deny reason.
	Deny []string `json:"deny,omitempty"`
	// Approvals: count 0 means no approvals are required; approvers, when
	// given, must be the same set; expires, when given, the same duration.
	Approvals      *ExpectApprovals `json:"approvals,omitempty"`
	ChangeRequired *bool            `json:"change_required,omitempty"`
	// Freeze: a name, "" for no freeze, or {name, reopens_at}.
	Freeze     *ExpectFreeze `json:"freeze,omitempty"`
	BreakGlass *bool         `json:"break_glass,omitempty"`
	// MissingPromotions, when given ([] for none), must be the same set.
	MissingPromotions []string `json:"missing_promotions,omitempty"`
}

// ExpectApprovals is the approvals a case expects.
type ExpectApprovals struct {
	Count     int      `json:"count"`
	Approvers []string `json:"approvers,omitempty"`
	Expires   string   `json:"expires,omitempty"`
}

// ExpectFreeze is the freeze a case expects; an empty Name expects none.
type ExpectFreeze struct {
	Name      string `json:"name"`
	ReopensAt string `json:"reopens_at,omitempty"`
}

// UnmarshalJSON reads a freeze name or {name, reopens_at}.
func (f *ExpectFreeze) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err == nil {
		*f = ExpectFreeze{Name: name}
		return nil
	}
	type plain ExpectFreeze
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode((*plain)(f)); err != nil {
		return fmt.Errorf("freeze: want a name or {name, reopens_at}: %w", err)
	}
	return nil
}

// Check compares d with the expectation and returns one line per mismatch,
// such as `allowed: got false, want true`; none when d passes.
func (e Expect) Check(d Decision) []string {
	var out []string
	mismatch := func(field string, got, want any) {
		out = append(out, fmt.Sprintf("%s: got %v, want %v", field, got, want))
	}
	if e.Allowed != nil && d.Allowed != *e.Allowed {
		mismatch("allowed", d.Allowed, *e.Allowed)
	}
	for _, want := range e.Deny {
		if !slices.ContainsFunc(d.Deny, func(r string) bool { return strings.Contains(r, want) }) {
			out = append(out, fmt.Sprintf("deny: no reason contains %q (reasons: %s)", want, quoteList(d.Deny)))
		}
	}
	if e.ChangeRequired != nil && d.ChangeRequired != *e.ChangeRequired {
		mismatch("change_required", d.ChangeRequired, *e.ChangeRequired)
	}
	if e.BreakGlass != nil && d.BreakGlass != *e.BreakGlass {
		mismatch("break_glass", d.BreakGlass, *e.BreakGlass)
	}
	if e.MissingPromotions != nil && !slices.Equal(sortedSet(e.MissingPromotions), d.MissingPromotions) {
		mismatch("missing_promotions", quoteList(d.MissingPromotions), quoteList(sortedSet(e.MissingPromotions)))
	}
	if a := e.Approvals; a != nil {
		got := d.Approvals
		if got == nil {
			got = &Approvals{}
		}
		if got.Count != a.Count {
			mismatch("approvals.count", got.Count, a.Count)
		}
		if a.Approvers != nil && !slices.Equal(sortedSet(a.Approvers), sortedSet(got.Approvers)) {
			mismatch("approvals.approvers", quoteList(got.Approvers), quoteList(sortedSet(a.Approvers)))
		}
		if a.Expires != "" {
			want, err := time.ParseDuration(a.Expires)
			if err != nil {
				out = append(out, fmt.Sprintf("approvals.expires: %q is not a duration", a.Expires))
			} else if got.Expires.D() != want {
				mismatch("approvals.expires", got.Expires.D(), want)
			}
		}
	}
	if f := e.Freeze; f != nil {
		switch {
		case f.Name == "" && d.Freeze != nil:
			mismatch("freeze", strconvQuote(d.Freeze.Name), "none")
		case f.Name == "":
		case d.Freeze == nil:
			mismatch("freeze", "none", strconvQuote(f.Name))
		case d.Freeze.Name != f.Name:
			mismatch("freeze", strconvQuote(d.Freeze.Name), strconvQuote(f.Name))
		}
		if f.ReopensAt != "" && d.Freeze != nil {
			want, err := time.Parse(time.RFC3339, f.ReopensAt)
			if err != nil {
				out = append(out, fmt.Sprintf("freeze.reopens_at: %q is not an RFC 3339 time", f.ReopensAt))
			} else if !d.Freeze.ReopensAt.Equal(want) {
				mismatch("freeze.reopens_at", d.Freeze.ReopensAt.UTC().Format(time.RFC3339), want.UTC().Format(time.RFC3339))
			}
		}
	}
	return out
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

func quoteList(s []string) string {
	if len(s) == 0 {
		return "[]"
	}
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconvQuote(v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// LoadCases reads a table of policy tests.
func LoadCases(path string) ([]Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read policy cases: %w", err)
	}
	return ParseCases(path, data)
}

// ParseCases reads a table of policy tests:
//
//	cases:
//	  - name: year-end freeze blocks prod
//	    input: {descriptor: {…}, identity: {subject: token:ci}, now: 2026-12-24T10:00:00Z}
//	    expect: {allowed: false, deny: [year-end], freeze: year-end}
//
// Every problem is reported at once in a *LoadError with its line.
func ParseCases(name string, data []byte) ([]Case, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlLoadError(name, data, err)
	}
	le := &LoadError{File: name}
	bad := func(line int, path, msg string) {
		le.Problems = append(le.Problems, Problem{Line: line, Path: path, Message: msg})
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	var items *yaml.Node
	if doc.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(doc.Content); i += 2 {
			switch k := doc.Content[i]; k.Value {
			case "cases":
				items = doc.Content[i+1]
			default:
				bad(k.Line, "", fmt.Sprintf("unknown field %q", k.Value))
			}
		}
	}
	if items == nil || items.Kind != yaml.SequenceNode || len(items.Content) == 0 {
		bad(doc.Line, "cases", "want a list of cases under the key \"cases\"")
		return nil, le
	}
	var cases []Case
	seen := map[string]bool{}
	for i, item := range items.Content {
		at := fmt.Sprintf("cases[%d]", i)
		var v any
		if err := item.Decode(&v); err != nil {
			bad(item.Line, at, err.Error())
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			bad(item.Line, at, err.Error())
			continue
		}
		c := Case{Line: item.Line}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			var named struct{ Name string }
			_ = json.Unmarshal(raw, &named)
			msg := strings.TrimPrefix(err.Error(), "json: ")
			if named.Name != "" {
				msg = fmt.Sprintf("case %q: %s", named.Name, msg)
			}
			bad(item.Line, at, msg)
			continue
		}
		switch {
		case c.Name == "":
			bad(item.Line, at, "a case needs a name")
		case seen[c.Name]:
			bad(item.Line, at, fmt.Sprintf("case %q is defined twice", c.Name))
		case c.Input.Descriptor == nil:
			bad(item.Line, at, fmt.Sprintf("case %q: input.descriptor is required", c.Name))
		}
		seen[c.Name] = true
		cases = append(cases, c)
	}
	if len(le.Problems) > 0 {
		return nil, le
	}
	return cases, nil
}
