package descriptor

import "regexp"

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
