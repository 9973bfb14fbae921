package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/suggest"
)

// intParam reads the query parameter name of r as an integer from lo to
// hi, def when it is absent. Anything else is an EInvalid saying what name
// must be (want) and quoting the value, clipped to maxEchoed.
func intParam(r *http.Request, name string, lo, hi, def int, want string) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, manent.Errorf(manent.EInvalid, "%s must be %s, got %q", name, want, manent.ClipText(v, maxEchoed))
	}
	return n, nil
}

// limitParam reads ?limit=, a page size from 1 to hi, def when absent.
func limitParam(r *http.Request, hi, def int) (int, error) {
	return intParam(r, "limit", 1, hi, def, fmt.Sprintf("a number from 1 to %d", hi))
}

// targetNotText says what in r's path or query string is not text — a
// byte that is not UTF-8, a control character (NUL, an escape, a line
// break), a bidirectional-text control — or that the query string cannot
// be decoded, and "" when both are text. No id, name or filter of the API
// holds such a character; checked before any route, it is never looked up
// (on PostgreSQL a NUL or an invalid byte in a text parameter fails the
// query), echoed, or a malformed pair silently dropped from a filter.
func targetNotText(r *http.Request) string {
	if what := notText(r.URL.Path); what != "" {
		return "the path " + what
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "the query string is malformed: " + err.Error() + " (percent-encode %, & and ; inside a value)"
	}
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if what := notText(name); what != "" {
			return "a query parameter name " + what
		}
		for _, v := range q[name] {
			if what := notText(v); what != "" {
				return "query parameter " + manent.ClipText(name, maxEchoed) + " " + what
			}
		}
	}
	return ""
}

// notText says why s is not a single line of text ("is not UTF-8 text:
// invalid byte 0xff at byte 3", "holds the control character U+0000 at
// character 2"), or "".
func notText(s string) string {
	if bad := invalidUTF8(s); bad != "" {
		return "is not UTF-8 text: " + bad
	}
	if _, at, what, bad := descriptor.FirstControl(s); bad {
		return fmt.Sprintf("holds %s at character %d: ids, names and filters are text without control characters", what, at)
	}
	return ""
}

// invalidUTF8 names the first byte of s that is not UTF-8 ("invalid byte
// 0xff at byte 3", from 1), or "" when s is UTF-8.
func invalidUTF8(s string) string {
	if utf8.ValidString(s) {
		return ""
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return fmt.Sprintf("invalid byte 0x%02x at byte %d", s[i], i+1)
		}
		i += size
	}
	return ""
}

// query wraps the handler of a list route that reads the query
// parameters known, and no other: a parameter it does not read is
// refused (400) naming it and the closest known one — a script's typo
// (?stat=ERROR) listed everything, as if unfiltered — and so is one given
// more than once, which the route read the first of (?state=A&state=B
// listed A; state takes a comma-separated list).
func query(h http.HandlerFunc, known ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := unknownParameter(r, known); err != nil {
			writeBadQuery(w, err)
			return
		}
		h(w, r)
	}
}

// writeBadQuery answers the error of unknownParameter or boolParam: 400,
// as a query string that is not text (targetNotText): the request is
// malformed, whatever its values.
func writeBadQuery(w http.ResponseWriter, err *manent.Error) {
	w.Header().Set("Content-Type", api.ProblemContentType)
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(api.Problem{Title: http.StatusText(http.StatusBadRequest), Status: http.StatusBadRequest,
		Detail: err.Error(), Errors: err.Fields})
}

// boolParam reads the switch name of r's query: false when absent, true
// for "true", false for "false", and an error for anything else — ?dry_run,
// ?dry_run=1 or ?dry_run=yes meant a dry run and, read as "not true",
// deployed; ?follow=1 answered a page instead of following.
func boolParam(r *http.Request, name string) (bool, *manent.Error) {
	vs, ok := r.URL.Query()[name]
	if !ok {
		return false, nil
	}
	switch v := vs[0]; v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	default:
		route := r.Pattern
		if route == "" {
			route = r.Method + " " + manent.ClipText(r.URL.Path, maxEchoed)
		}
		msg := fmt.Sprintf("query parameter %q is %q; it takes true or false", name, manent.ClipText(v, maxEchoed))
		return false, &manent.Error{Code: manent.EInvalid, Message: fmt.Sprintf("%s: %s reads nothing else", msg, route),
			Fields: []manent.FieldError{{Path: "query." + name, Message: msg}}}
	}
}

// unknownParameter checks r's query against known (see query): the first
// wrong parameter in name order, as a field error "query.<name>", or nil.
func unknownParameter(r *http.Request, known []string) *manent.Error {
	q := r.URL.Query() // decodable: targetNotText checked it before any route
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	sort.Strings(names)
	route := r.Pattern
	if route == "" {
		route = r.Method + " " + r.URL.Path
	}
	takes := "no query parameter"
	if len(known) > 0 {
		takes = "only " + strings.Join(known, ", ")
	}
	for _, name := range names {
		shown := manent.ClipText(name, maxEchoed)
		if !slices.Contains(known, name) {
			msg := fmt.Sprintf("unknown query parameter %q", shown)
			if len(name) <= maxEchoed {
				if near := suggest.Closest(name, known); near != "" {
					msg += fmt.Sprintf("; did you mean %q?", near)
				}
			}
			return &manent.Error{Code: manent.EInvalid,
				Message: fmt.Sprintf("%s: %s takes %s (a parameter it does not read would not narrow the answer)", msg, route, takes),
				Fields:  []manent.FieldError{{Path: "query." + shown, Message: msg}}}
		}
		if n := len(q[name]); n > 1 {
			msg := fmt.Sprintf("query parameter %q is given %d times; give it once", shown, n)
			if name == "state" {
				msg += " (it takes a comma-separated list: state=ERROR,CANCELLED)"
			}
			return &manent.Error{Code: manent.EInvalid, Message: fmt.Sprintf("%s: %s reads one value of each", msg, route),
				Fields: []manent.FieldError{{Path: "query." + shown, Message: msg}}}
		}
	}
	return nil
}
