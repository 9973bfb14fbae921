package governance

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/suggest"
)

// shapeError is a decision of the wrong shape: every wrong field, in the
// words of the policy (decision.deny, approvals.count), not of Go's JSON
// decoder.
type shapeError struct {
	problems []string
}

func (e *shapeError) Error() string {
	if len(e.problems) == 1 {
		return "the decision has the wrong shape: " + e.problems[0]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the decision has %d mistakes:", len(e.problems))
	for i, p := range e.problems {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " (%d) %s", i+1, p)
	}
	return b.String()
}

// readDecision reads a policy's decision, the JSON of `decision` or of the
// whole package (whole), into a regoDecision. Keys it does not know are
// left alone (a package's helper rules are keys of its document). JSON null
// is the same as an absent key, as it always was.
func readDecision(raw []byte, whole bool) (regoDecision, error) {
	var rd regoDecision
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return rd, fmt.Errorf("the decision is not JSON: %w", err)
	}
	// A policy that defines `decision` is told about decision.deny; one
	// that writes the rules separately, about its rule deny.
	prefix := "decision."
	if whole {
		prefix = ""
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return rd, &shapeError{[]string{fmt.Sprintf("%s is %s; it must be an object like {\"deny\": […], \"approvals\": {…}}",
			strings.TrimSuffix(prefix, "."), kindOf(v))}}
	}
	r := &shapeReader{prefix: prefix}
	// A key is left alone unless it is a misspelling of one the decision
	// reads (misspelled below): "aprovals" read as no approvals at all,
	// "approver" as approvers omitted — whoever RBAC lets approve.
	// Another package's rules (whole) may be named anything: only
	// `decision`'s own keys are checked there.
	if !whole {
		r.misspelled(doc, "", "the decision", decisionKeys)
	}
	rd.Allowed = r.boolean(doc, "allowed")
	rd.Deny = r.list(doc, "deny", "a set or array of strings (the reasons)", "every reason must be a string")
	if a := r.object(doc, "approvals", "{count, approvers, expires}"); a != nil {
		rd.Approvals = &regoApprovals{}
		r.misspelled(a, "approvals.", "approvals", []string{"count", "approvers", "expires"})
		if c := field(a, "count"); c != nil {
			if n, ok := c.(json.Number); !ok {
				r.bad("approvals.count", "is %s; it must be a number", kindOf(c))
			} else if f, err := strconv.ParseFloat(n.String(), 64); err != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
				r.bad("approvals.count", "is %s; it must be a whole number", n)
			} else {
				rd.Approvals.Count = int(f)
			}
		}
		rd.Approvals.Approvers = r.list(a, "approvals.approvers",
			"a set or array of identity patterns (strings such as \"group:sre\")", "every approver must be a string")
		rd.Approvals.Expires = r.text(a, "approvals.expires", "a duration string like \"24h\"")
	}
	rd.ChangeRequired = ptrValue(r.boolean(doc, "change_required"))
	if f := r.object(doc, "freeze", "{name, reopens_at}"); f != nil {
		r.misspelled(f, "freeze.", "freeze", []string{"name", "reopens_at"})
		rd.Freeze = &regoFreeze{
			Name:      r.text(f, "freeze.name", "a string (the freeze's name)"),
			ReopensAt: r.text(f, "freeze.reopens_at", "an RFC 3339 time string"),
		}
	}
	rd.BreakGlass = ptrValue(r.boolean(doc, "break_glass"))
	rd.MissingPromotions = r.list(doc, "missing_promotions", "a set or array of strings (environment names)", "every environment must be a string")
	if len(r.problems) > 0 {
		return rd, &shapeError{r.problems}
	}
	return rd, nil
}

// shapeReader reads the fields of a decision and collects what is wrong
// with them, each named by its path (prefix + key: decision.deny,
// approvals.count) in the words of a policy author. Each read takes the
// key's path; the key in m is its last segment.
type shapeReader struct {
	prefix   string
	problems []string
}

func (r *shapeReader) bad(path, format string, args ...any) {
	r.problems = append(r.problems, r.prefix+path+" "+fmt.Sprintf(format, args...))
}

// lastKey is the key a path names in its object: count of approvals.count.
func lastKey(path string) string {
	return path[strings.LastIndexByte(path, '.')+1:]
}

// misspelled reports each key of m close to one of known (of what, at
// path): see misspelled.
func (r *shapeReader) misspelled(m map[string]any, path, what string, known []string) {
	misspelled(m, known, func(k, near string) {
		r.bad(path+k, "is not a key of %s: did you mean %s? (a key %s does not read is ignored)", what, near, what)
	})
}

// boolean is the boolean at path, nil when absent or of another kind.
func (r *shapeReader) boolean(m map[string]any, path string) *bool {
	x := field(m, lastKey(path))
	if x == nil {
		return nil
	}
	b, ok := x.(bool)
	if !ok {
		r.bad(path, "is %s; it must be true or false", kindOf(x))
		return nil
	}
	return &b
}

// text is the string at path, "" when absent or of another kind (want
// says what it must be).
func (r *shapeReader) text(m map[string]any, path, want string) string {
	x := field(m, lastKey(path))
	if x == nil {
		return ""
	}
	s, ok := x.(string)
	if !ok {
		r.bad(path, "is %s; it must be %s", kindOf(x), want)
	}
	return s
}

// object is the object at path, nil when absent or of another kind
// (fields lists its keys for the message).
func (r *shapeReader) object(m map[string]any, path, fields string) map[string]any {
	x := field(m, lastKey(path))
	if x == nil {
		return nil
	}
	o, ok := x.(map[string]any)
	if !ok {
		r.bad(path, "is %s; it must be an object %s or null", kindOf(x), fields)
	}
	return o
}

// list is the set or array of strings at path (stringsOf).
func (r *shapeReader) list(m map[string]any, path, want, each string) []string {
	return stringsOf(field(m, lastKey(path)), func(format string, args ...any) { r.bad(path, format, args...) }, want, each)
}

// ptrValue is *p, false for nil.
func ptrValue(p *bool) bool { return p != nil && *p }

// decisionKeys are the keys a decision is read from.
var decisionKeys = []string{"allowed", "deny", "approvals", "change_required", "freeze", "break_glass", "missing_promotions"}

// misspelled calls bad, in key order, for each key of m that is none of
// known (in any case, as field reads them) but close to one of them: a
// misspelling (suggest.Closest) that would be ignored. Other keys are the
// policy's own and stay ignored.
func misspelled(m map[string]any, known []string, bad func(key, near string)) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if slices.ContainsFunc(known, func(n string) bool { return strings.EqualFold(n, k) }) {
			continue
		}
		if near := suggest.Closest(k, known); near != "" {
			bad(manent.ClipText(k, 64), near)
		}
	}
}

// field is the value of key in m, nil when m has none (null is the same
// as no key). As Go's JSON
// decoder read decisions before, a key in another case ("Deny") is the same
// key when m has no exact one: a policy that denied with it still denies.
// Of several such keys, the last in sorted order counts, as it did.
func field(m map[string]any, key string) any {
	if x, ok := m[key]; ok {
		return x
	}
	found, at := false, ""
	for k := range m {
		if strings.EqualFold(k, key) && (!found || k > at) {
			found, at = true, k
		}
	}
	if !found {
		return nil
	}
	return m[at]
}

// stringsOf reads a set or array of strings (OPA gives a set as an array);
// bad reports what is wrong with it.
func stringsOf(x any, bad func(format string, args ...any), want, each string) []string {
	if x == nil {
		return nil
	}
	list, ok := x.([]any)
	if !ok {
		bad("is %s; it must be %s", kindOf(x), want)
		return nil
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			bad("holds %s (%s); %s", kindOf(e), shortJSON(e), each)
			return nil
		}
		out = append(out, s)
	}
	return out
}

// kindOf names the kind of a JSON value as a policy author knows it.
func kindOf(x any) string {
	switch x.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", x)
}

// shortJSON is x as JSON, cut to what fits in a message.
func shortJSON(x any) string {
	b, err := json.Marshal(x)
	if err != nil {
		return fmt.Sprint(x)
	}
	if s := string(b); len(s) <= 60 {
		return s
	}
	return string(b[:57]) + "…"
}
