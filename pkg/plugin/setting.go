package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/suggest"
)

// SettingError is what is wrong with one setting of a plugin's `with`.
// Path is the setting's place below `with` as a JSON pointer without its
// leading slash ("timeout", "command/1", "headers/X-A"; SettingPath builds
// one), or "" for `with` itself (a required setting that is missing).
// Admission reports each at its own place (/target/with/timeout), which
// `manent validate` shows as the value's line and column. Validate may
// return several, joined with errors.Join.
type SettingError struct {
	Path string
	Err  error
}

func (e *SettingError) Error() string { return e.Err.Error() }
func (e *SettingError) Unwrap() error { return e.Err }

// Settingf returns a *SettingError at path with a formatted message.
func Settingf(path, format string, args ...any) error {
	return &SettingError{Path: path, Err: fmt.Errorf(format, args...)}
}

// SettingAt is the place of setting key in with, for a SettingError: the
// setting itself when with has it, with itself (the setting is missing)
// when it has not.
func SettingAt(with map[string]any, key string) string {
	if _, set := with[key]; set {
		return SettingPath(key)
	}
	return ""
}

// SettingPath joins the segments of a setting's place below `with` into a
// JSON pointer without its leading slash, escaping '~' and '/' in each.
func SettingPath(segments ...string) string {
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	out := make([]string, len(segments))
	for i, s := range segments {
		out[i] = esc.Replace(s)
	}
	return strings.Join(out, "/")
}

// SettingErrors returns the setting errors err is made of, through wraps
// and joins (a wrap's own text, such as a plugin's "script: " prefix, is
// dropped), when every problem in it is one; nil when any is not.
func SettingErrors(err error) []*SettingError {
	out, ok := settingErrors(err)
	if !ok {
		return nil
	}
	return out
}

func settingErrors(err error) ([]*SettingError, bool) {
	switch e := err.(type) {
	case nil:
		return nil, false
	case *SettingError:
		return []*SettingError{e}, true
	case interface{ Unwrap() []error }:
		var out []*SettingError
		for _, inner := range e.Unwrap() {
			got, ok := settingErrors(inner)
			if !ok {
				return nil, false
			}
			out = append(out, got...)
		}
		return out, len(out) > 0
	default:
		if inner := errors.Unwrap(err); inner != nil {
			return settingErrors(inner)
		}
		return nil, false
	}
}

// Settings reads a plugin's `with` and collects every problem with it, one
// SettingError each: a key the plugin does not know (naming a close one
// and all it knows), a required setting that is missing, a value of the
// wrong type or out of range. Built-in plugins read their settings through
// it, so that Validate refuses at submission whatever the run would ignore
// or read otherwise (SPEC §11.2: the dry run says what the run does).
//
// A setting written as null (`timeout:` with nothing after it) counts as
// not set. The readers leave their destination alone when the setting is
// not set or is refused: it keeps the plugin's default.
type Settings struct {
	with map[string]any
	errs []error
}

// maxSuggested bounds the unknown keys Settings compares with the known
// ones for a "did you mean": a hostile `with` of 1 MiB holds tens of
// thousands of keys, each refused anyway.
const maxSuggested = 100

// ReadSettings starts reading with, whose keys must be among known: each
// other key is refused at once, in key order.
func ReadSettings(with map[string]any, known ...string) *Settings {
	s := &Settings{with: with}
	sorted := slices.Sorted(slices.Values(known))
	list := strings.Join(sorted, ", ")
	n := 0
	for _, k := range slices.Sorted(maps.Keys(with)) {
		if slices.Contains(known, k) {
			continue
		}
		hint := ""
		if n++; n <= maxSuggested {
			if close := suggest.Closest(k, sorted); close != "" {
				hint = fmt.Sprintf("did you mean %q? ", close)
			}
		}
		s.Fail(SettingPath(k), "unknown setting with.%s (%sknown: %s)", k, hint, list)
	}
	return s
}

// Fail adds a problem at path (a SettingPath; "" for `with` itself).
func (s *Settings) Fail(path, format string, args ...any) {
	s.errs = append(s.errs, Settingf(path, format, args...))
}

// Add adds err, a problem found by other means (a SettingError, such as
// WithEnv's), when it is not nil.
func (s *Settings) Add(err error) {
	if err != nil {
		s.errs = append(s.errs, err)
	}
}

// Err is every problem found (nil: none), read as one line joined by
// "; " (a step's error is one line); SettingErrors finds each.
func (s *Settings) Err() error {
	if len(s.errs) == 0 {
		return nil
	}
	return settingList(slices.Clone(s.errs))
}

// settingList is the problems of one `with`.
type settingList []error

func (l settingList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

func (l settingList) Unwrap() []error { return l }

// value is the setting key, and whether it is set (and not null).
func (s *Settings) value(key string) (any, bool) {
	v, ok := s.with[key]
	return v, ok && v != nil
}

// Has says whether setting key is set (and not null).
func (s *Settings) Has(key string) bool {
	_, ok := s.value(key)
	return ok
}

// Require refuses a missing setting key (at `with` itself) and says
// whether it is set.
func (s *Settings) Require(key string) bool {
	if s.Has(key) {
		return true
	}
	s.Fail("", "with.%s is required", key)
	return false
}

// String reads a string setting into dst; it reports whether it did.
func (s *Settings) String(key string, dst *string) bool {
	v, ok := s.value(key)
	if !ok {
		return false
	}
	str, ok := v.(string)
	if !ok {
		s.Fail(SettingPath(key), "with.%s must be a string, got %s", key, valueKind(v))
		return false
	}
	*dst = str
	return true
}

// Duration reads a duration setting into dst: a string in Go's syntax
// (30s, 10m, 1h30m) greater than zero. A number is refused: 1 would be
// read as one nanosecond or one second depending on whom you ask.
func (s *Settings) Duration(key string, dst *time.Duration) bool {
	v, ok := s.value(key)
	if !ok {
		return false
	}
	str, ok := v.(string)
	if !ok {
		s.Fail(SettingPath(key), "with.%s must be a duration such as 30s or 10m, with its unit, got %s", key, valueKind(v))
		return false
	}
	d, err := time.ParseDuration(str)
	if err != nil || d <= 0 {
		s.Fail(SettingPath(key), "with.%s %q is not a positive duration (write it with its unit, such as 30s or 10m)", key, str)
		return false
	}
	*dst = d
	return true
}

// Bool reads a boolean setting (true or false) into dst.
func (s *Settings) Bool(key string, dst *bool) bool {
	v, ok := s.value(key)
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		s.Fail(SettingPath(key), "with.%s must be true or false, got %s", key, valueKind(v))
		return false
	}
	*dst = b
	return true
}

// Int reads an integer setting of at least min into dst, whichever way the
// number reached the plugin (YAML gives int, JSON float64 or json.Number).
func (s *Settings) Int(key string, min int, dst *int) bool {
	v, ok := s.value(key)
	if !ok {
		return false
	}
	n, ok := integer(v)
	if !ok || n < min {
		s.Fail(SettingPath(key), "with.%s must be an integer of at least %d, got %s", key, min, valueKind(v))
		return false
	}
	*dst = n
	return true
}

// Strings reads a list of strings into dst; with scalars, a number or a
// boolean in the list is taken as written (a status value 200).
func (s *Settings) Strings(key string, scalars bool, dst *[]string) bool {
	v, ok := s.value(key)
	if !ok {
		return false
	}
	want := "strings"
	if scalars {
		want = "strings, numbers or booleans"
	}
	var list []string
	switch l := v.(type) {
	case []string:
		list = l
	case []any:
		good := true
		for i, e := range l {
			str, ok := scalar(e, scalars)
			if !ok {
				s.Fail(SettingPath(key, strconv.Itoa(i)), "with.%s[%d] must be one of %s, got %s", key, i, want, valueKind(e))
				good = false
				continue
			}
			list = append(list, str)
		}
		if !good {
			return false
		}
	default:
		s.Fail(SettingPath(key), "with.%s must be a list of %s, got %s", key, want, valueKind(v))
		return false
	}
	*dst = list
	return true
}

// StringMap reads a mapping of strings (headers) into dst.
func (s *Settings) StringMap(key string, dst *map[string]string) bool {
	v, ok := s.value(key)
	if !ok {
		return false
	}
	m, ok := v.(map[string]any)
	if !ok {
		if ms, ok := v.(map[string]string); ok {
			*dst = maps.Clone(ms)
			return true
		}
		s.Fail(SettingPath(key), "with.%s must be a mapping of names to strings, got %s", key, valueKind(v))
		return false
	}
	out := make(map[string]string, len(m))
	good := true
	for _, k := range slices.Sorted(maps.Keys(m)) {
		str, ok := m[k].(string)
		if !ok {
			s.Fail(SettingPath(key, k), "with.%s.%s must be a string, got %s", key, k, valueKind(m[k]))
			good = false
			continue
		}
		out[k] = str
	}
	if !good {
		return false
	}
	*dst = out
	return true
}

// scalar is e as a string: a string, or with numbers a number or boolean
// as fmt.Sprint writes it (as a plugin reads one from a JSON document).
func scalar(e any, numbers bool) (string, bool) {
	switch v := e.(type) {
	case string:
		return v, true
	case bool, int, int64, uint64, float64, json.Number:
		return fmt.Sprint(v), numbers
	}
	return "", false
}

// integer is v as an integer, whichever way a number reached the plugin.
func integer(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), n >= math.MinInt32 && n <= math.MaxInt32
	case uint64:
		return int(n), n <= math.MaxInt32
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > math.MaxInt32 {
			return 0, false
		}
		return int(n), true
	case json.Number:
		i, err := n.Int64()
		return int(i), err == nil && i >= math.MinInt32 && i <= math.MaxInt32
	}
	return 0, false
}

// valueKind names what v is, quoting it when short, for a message: the
// number 1, the string "x", a list, a mapping.
func valueKind(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 40 {
			return "a string"
		}
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the boolean %t", x)
	case int, int64, uint64, json.Number:
		return fmt.Sprintf("the number %v", x)
	case float64:
		return "the number " + strconv.FormatFloat(x, 'g', -1, 64)
	case []any, []string:
		return "a list"
	case map[string]any, map[string]string:
		return "a mapping"
	case nil:
		return "null"
	}
	return fmt.Sprintf("a %T", v)
}
