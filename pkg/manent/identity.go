package manent

import "path"

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
