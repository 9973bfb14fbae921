package manent

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Identity is who acts: a subject such as "token:ci" or
// "oidc:alice@example.com", and the subject's groups without the "group:"
// prefix that patterns use for them.
type Identity struct {
	Subject string   `json:"subject"`
	Groups  []string `json:"groups"`
}

// String returns the subject.
func (id Identity) String() string { return id.Subject }

// Matches reports whether one of patterns names the identity. This is the
// one rule for every list of identity patterns in manent — RBAC subjects,
// freeze allow lists, approvers:
//
//   - a pattern is a glob (path.Match syntax) matched against the subject,
//     or against "group:<name>" for each of the identity's groups;
//   - "*" matches every identity that has a subject;
//   - an EMPTY list matches no one. A list that means "anyone" says "*".
//
// An identity without a subject (anonymous) matches nothing.
func (id Identity) Matches(patterns []string) bool {
	if id.Subject == "" {
		return false
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, id.Subject); ok {
			return true
		}
		for _, g := range id.Groups {
			if ok, _ := path.Match(p, "group:"+g); ok {
				return true
			}
		}
	}
	return false
}

// subjectKinds are the prefixes of what an identity pattern matches: an
// identity's subject (token:<name>, oidc:<claim value>) or one of its
// groups (group:<name>).
var subjectKinds = []string{"token", "oidc", "group"}

// DeadPattern says why identity pattern p can match no identity, or "": a
// pattern whose kind — the text before its first ":", or all of it
// without one — holds no glob character and is not token, oidc or group.
// "ci" in rbac subjects, "sre" in approvers or "alice@example.com" in a
// freeze's allow matched no one, without a word.
func DeadPattern(p string) string {
	kind, name, colon := strings.Cut(p, ":")
	if HasGlob(kind) || slices.Contains(subjectKinds, kind) || strings.TrimSpace(p) == "" {
		return ""
	}
	if !colon {
		name = p
	}
	var mean []string
	for _, k := range subjectKinds {
		mean = append(mean, fmt.Sprintf("%q", k+":"+name))
	}
	return fmt.Sprintf("%q names no identity, so it matches no one: an identity pattern is token:<name> (auth.tokens), oidc:<claim value>, group:<name> or a pattern such as \"*\" (did you mean %s?)",
		p, strings.Join(mean, ", "))
}

// HasGlob reports whether identity pattern p holds a character Matches
// reads as a pattern (path.Match's *, ?, [ and \), not as itself.
func HasGlob(p string) bool { return strings.ContainsAny(p, `*?[\`) }
