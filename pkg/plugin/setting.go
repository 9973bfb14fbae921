package plugin

import (
	"errors"
	"fmt"
	"strings"
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
