package governance

import "path"

// Patterns in the rules are globs with path.Match syntax: "*" and "?" match
// any characters but "/", "[a-z]" a class. Names of applications,
// environments and regions never hold a "/", so "*" matches any of them.

// matchScope matches value against patterns; no patterns means all.
func matchScope(patterns []string, value string) bool {
	return len(patterns) == 0 || matchAny(patterns, value)
}

// matchAny reports whether one of patterns matches value.
func matchAny(patterns []string, value string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, value); ok {
			return true
		}
	}
	return false
}

// validPattern reports whether p is a well-formed, non-empty glob.
func validPattern(p string) bool {
	if p == "" {
		return false
	}
	_, err := path.Match(p, "")
	return err == nil
}
