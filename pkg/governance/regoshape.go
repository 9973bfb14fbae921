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
	var problems []string
	bad := func(key, format string, args ...any) {
		problems = append(problems, prefix+key+" "+fmt.Sprintf(format, args...))
	}
	// A key is left alone unless it is a misspelling of one the decision
	// reads (misspelled below): "aprovals" read as no approvals at all,
	// "approver" as approvers omitted — whoever RBAC lets approve.
	// Another package's rules (whole) may be named anything: only
	// `decision`'s own keys are checked there.
	if !whole {
		misspelled(doc, decisionKeys, func(k, near string) {
			bad(k, "is not a key of the decision: did you mean %s? (a key the decision does not read is ignored)", near)
		})
	}
	if x := field(doc, "allowed"); x != nil {
		if b, ok := x.(bool); ok {
			rd.Allowed = &b
		} else {
			bad("allowed", "is %s; it must be true or false", kindOf(x))
		}
	}
	rd.Deny = stringsOf(field(doc, "deny"), func(format string, args ...any) { bad("deny", format, args...) },
		"a set or array of strings (the reasons)", "every reason must be a string")
	if x := field(doc, "approvals"); x != nil {
		if a, ok := x.(map[string]any); ok {
			rd.Approvals = &regoApprovals{}
			misspelled(a, []string{"count", "approvers", "expires"}, func(k, near string) {
				bad("approvals."+k, "is not a key of approvals: did you mean %s? (a key approvals does not read is ignored)", near)
			})
			if c := field(a, "count"); c != nil {
				if n, ok := c.(json.Number); !ok {
					bad("approvals.count", "is %s; it must be a number", kindOf(c))
				} else if f, err := strconv.ParseFloat(n.String(), 64); err != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
					bad("approvals.count", "is %s; it must be a whole number", n)
				} else {
					rd.Approvals.Count = int(f)
				}
			}
			rd.Approvals.Approvers = stringsOf(field(a, "approvers"), func(format string, args ...any) { bad("approvals.approvers", format, args...) },
				"a set or array of identity patterns (strings such as \"group:sre\")", "every approver must be a string")
			if e := field(a, "expires"); e != nil {
				if s, ok := e.(string); ok {
					rd.Approvals.Expires = s
				} else {
					bad("approvals.expires", "is %s; it must be a duration string like \"24h\"", kindOf(e))
				}
			}
		} else {
			bad("approvals", "is %s; it must be an object {count, approvers, expires} or null", kindOf(x))
		}
	}
	if x := field(doc, "change_required"); x != nil {
		if b, ok := x.(bool); ok {
			rd.ChangeRequired = b
		} else {
			bad("change_required", "is %s; it must be true or false", kindOf(x))
		}
	}
	if x := field(doc, "freeze"); x != nil {
		if f, ok := x.(map[string]any); ok {
			rd.Freeze = &regoFreeze{}
			misspelled(f, []string{"name", "reopens_at"}, func(k, near string) {
				bad("freeze."+k, "is not a key of freeze: did you mean %s? (a key freeze does not read is ignored)", near)
			})
			if n := field(f, "name"); n != nil {
				if rd.Freeze.Name, ok = n.(string); !ok {
					bad("freeze.name", "is %s; it must be a string (the freeze's name)", kindOf(n))
				}
			}
			if r := field(f, "reopens_at"); r != nil {
				if rd.Freeze.ReopensAt, ok = r.(string); !ok {
					bad("freeze.reopens_at", "is %s; it must be an RFC 3339 time string", kindOf(r))
				}
			}
		} else {
			bad("freeze", "is %s; it must be an object {name, reopens_at} or null", kindOf(x))
		}
	}
	if x := field(doc, "break_glass"); x != nil {
		if b, ok := x.(bool); ok {
			rd.BreakGlass = b
		} else {
			bad("break_glass", "is %s; it must be true or false", kindOf(x))
		}
	}
	rd.MissingPromotions = stringsOf(field(doc, "missing_promotions"), func(format string, args ...any) { bad("missing_promotions", format, args...) },
		"a set or array of strings (environment names)", "every environment must be a string")
	if len(problems) > 0 {
		return rd, &shapeError{problems}
	}
	return rd, nil
}

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
