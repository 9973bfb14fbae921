package descriptor

import (
	"fmt"
	"regexp"
	"unicode/utf8"
)

// NamePattern is the rule of application and environment names: the
// schema's $defs/name (a test keeps the two the same). A name that matches
// is safe in a URL path and as a file name. Code that takes
// a name from elsewhere than a descriptor (the CLI's arguments) checks it
// with ValidName.
var NamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// NameRule says NamePattern in words.
const NameRule = `lowercase letters, digits and "-", starting with a letter or digit, at most 63 characters`

// ValidName reports whether s is a valid application or environment name.
func ValidName(s string) bool { return NamePattern.MatchString(s) }

// MaxVersion is the most characters of a version: the schema's maxLength
// of `version` (a test keeps the two the same).
const MaxVersion = 256

// VersionProblem says why v cannot be a descriptor's version — empty,
// longer than MaxVersion characters, not a single line of plain text — or
// returns "" when it can. Code that takes a version from elsewhere than a
// descriptor (rollback's "to") checks it with VersionProblem; the message
// never quotes v, which may be hostile.
func VersionProblem(v string) string {
	if v == "" {
		return "a version is 1 to 256 characters, got an empty one"
	}
	if n := utf8.RuneCountInString(v); n > MaxVersion {
		return fmt.Sprintf("a version is at most %d characters, got %d", MaxVersion, n)
	}
	if !utf8.ValidString(v) {
		return "a version is text (UTF-8), got bytes that are not"
	}
	if _, at, what, found := FirstControl(v); found {
		return fmt.Sprintf("a version is a single line of plain text: it contains %s at character %d", what, at)
	}
	return ""
}
