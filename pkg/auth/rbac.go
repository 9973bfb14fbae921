package auth

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/manent-io/manent/pkg/manent"
)

// Permission is what an RBAC rule grants (SPEC §8.1).
type Permission string

// Permissions. Admin implies every other one.
const (
	DeploymentSubmit  Permission = "deployment.submit"
	DeploymentDryRun  Permission = "deployment.dry-run"
	DeploymentRead    Permission = "deployment.read"
	DeploymentCancel  Permission = "deployment.cancel"
	DeploymentApprove Permission = "deployment.approve"
	ScheduleManage    Permission = "schedule.manage"
	AgentReport       Permission = "agent.report"
	AuditRead         Permission = "audit.read"
	Admin             Permission = "admin"
)

// Permissions returns every permission, in the order the SPEC lists them.
func Permissions() []Permission {
	return []Permission{
		DeploymentSubmit, DeploymentDryRun, DeploymentRead, DeploymentCancel,
		DeploymentApprove, ScheduleManage, AgentReport, AuditRead, Admin,
	}
}

// RBACRule is one entry of `rbac` (SPEC §8.1). Every list holds glob
// patterns with path.Match semantics ("*" matches everything).
type RBACRule struct {
	// Subjects are identity subjects ("token:ci", "oidc:*@example.com") or
	// groups ("group:deployers"). Required.
	Subjects []string `mapstructure:"subjects" yaml:"subjects"`
	// Permissions are granted on the matching applications and
	// environments. Required.
	Permissions []string `mapstructure:"permissions" yaml:"permissions"`
	// Applications and Environments scope the rule; empty means all.
	Applications []string `mapstructure:"applications" yaml:"applications,omitempty"`
	Environments []string `mapstructure:"environments" yaml:"environments,omitempty"`
	// Clusters scope agent.report (and admin's agent.report); empty means
	// all clusters.
	Clusters []string `mapstructure:"clusters" yaml:"clusters,omitempty"`
}

// BootstrapRule grants admin everywhere to BootstrapSubject. The server adds
// it to the policy when it accepts a bootstrap token.
func BootstrapRule() RBACRule {
	return RBACRule{
		Subjects:    []string{BootstrapSubject},
		Permissions: []string{string(Admin)},
	}
}

// Policy decides what identities may do. The zero Policy allows nothing.
type Policy struct {
	rules []RBACRule
}

// NewPolicy validates rules and returns the policy. Mistakes are an
// *manent.Error with code EInvalid and a field error for each, such as an
// unknown permission or a malformed pattern.
func NewPolicy(rules []RBACRule) (*Policy, error) {
	var errs []manent.FieldError
	bad := func(at, msg string) { errs = append(errs, manent.FieldError{Path: at, Message: msg}) }
	checkPatterns := func(at string, patterns []string, required bool) {
		if required && len(patterns) == 0 {
			bad(at, "must not be empty")
		}
		for j, p := range patterns {
			if _, err := path.Match(p, ""); err != nil || strings.TrimSpace(p) == "" {
				bad(fmt.Sprintf("%s[%d]", at, j), fmt.Sprintf("%q is not a valid glob pattern", p))
			}
		}
	}
	for i, r := range rules {
		at := fmt.Sprintf("rbac[%d]", i)
		checkPatterns(at+".subjects", r.Subjects, true)
		for j, subject := range r.Subjects {
			if msg := manent.DeadPattern(subject); msg != "" {
				bad(fmt.Sprintf("%s.subjects[%d]", at, j), msg)
			}
		}
		checkPatterns(at+".applications", r.Applications, false)
		checkPatterns(at+".environments", r.Environments, false)
		checkPatterns(at+".clusters", r.Clusters, false)
		if len(r.Permissions) == 0 {
			bad(at+".permissions", "must not be empty")
		}
		for j, p := range r.Permissions {
			if !slices.Contains(Permissions(), Permission(p)) {
				bad(fmt.Sprintf("%s.permissions[%d]", at, j), fmt.Sprintf("unknown permission %q (known: %s)", p, permissionList()))
			}
		}
	}
	if len(errs) > 0 {
		return nil, &manent.Error{Code: manent.EInvalid, Message: "invalid rbac configuration", Fields: errs}
	}
	return &Policy{rules: slices.Clone(rules)}, nil
}

func permissionList() string {
	var s []string
	for _, p := range Permissions() {
		s = append(s, string(p))
	}
	return strings.Join(s, ", ")
}

// Allowed reports whether id has perm on application/environment. An empty
// application or environment stands for "all of them": only a rule whose
// patterns cover every application (or environment) grants it, which is
// how global permissions such as audit.read are checked.
func (p *Policy) Allowed(id manent.Identity, perm Permission, application, environment string) bool {
	return p.anyRule(id, perm, matchScope, application, environment)
}

// anyRule reports whether one of id's rules for perm covers application
// and environment as match says.
func (p *Policy) anyRule(id manent.Identity, perm Permission, match func(patterns []string, value string) bool, application, environment string) bool {
	for _, r := range p.rulesFor(id, perm) {
		if match(r.Applications, application) && match(r.Environments, environment) {
			return true
		}
	}
	return false
}

// Authorize is Allowed as an error: nil, or an *manent.Error with code
// EForbidden such as "token:ci may not deployment.submit on billing/prod".
func (p *Policy) Authorize(id manent.Identity, perm Permission, application, environment string) error {
	if p.Allowed(id, perm, application, environment) {
		return nil
	}
	if application == "" && environment == "" {
		return manent.Errorf(manent.EForbidden, "%s may not %s", subjectOf(id), perm)
	}
	return forbidden(id, perm, application, environment)
}

// AllowedSomewhere reports whether id has perm on application in at
// least one environment (environment ""), on environment in at least one
// application (application ""), or on application/environment when both
// are named. It reads the rules only, never what exists: a read filter
// that names an application is refused the same whether or not it has
// deploys.
func (p *Policy) AllowedSomewhere(id manent.Identity, perm Permission, application, environment string) bool {
	some := func(patterns []string, value string) bool { return value == "" || matchScope(patterns, value) }
	return p.anyRule(id, perm, some, application, environment)
}

// AuthorizeSomewhere is AllowedSomewhere as an error (EForbidden), the
// one Authorize words: "token:ci may not deployment.read on web/*".
func (p *Policy) AuthorizeSomewhere(id manent.Identity, perm Permission, application, environment string) error {
	if p.AllowedSomewhere(id, perm, application, environment) {
		return nil
	}
	return forbidden(id, perm, application, environment)
}

// forbidden is the 403 of perm on application/environment ("" read as *).
func forbidden(id manent.Identity, perm Permission, application, environment string) error {
	return manent.Errorf(manent.EForbidden, "%s may not %s on %s/%s", subjectOf(id), perm, orAll(application), orAll(environment))
}

// CanRead reports whether id may read deployments of
// application/environment; list endpoints filter with it.
func (p *Policy) CanRead(id manent.Identity, application, environment string) bool {
	return p.Allowed(id, DeploymentRead, application, environment)
}

// AllowedCluster reports whether id may send agent reports for cluster: a
// rule granting agent.report (or admin) whose Clusters match it, where no
// Clusters means every cluster.
func (p *Policy) AllowedCluster(id manent.Identity, cluster string) bool {
	for _, r := range p.rulesFor(id, AgentReport) {
		if matchScope(r.Clusters, cluster) {
			return true
		}
	}
	return false
}

// AuthorizeCluster is AllowedCluster as an error (EForbidden).
func (p *Policy) AuthorizeCluster(id manent.Identity, cluster string) error {
	if p.AllowedCluster(id, cluster) {
		return nil
	}
	return manent.Errorf(manent.EForbidden, "%s may not %s on cluster %s", subjectOf(id), AgentReport, orAll(cluster))
}

// rulesFor returns the rules that name id (or one of its groups) and grant
// perm or admin.
func (p *Policy) rulesFor(id manent.Identity, perm Permission) []RBACRule {
	if p == nil || id.Subject == "" {
		return nil
	}
	var out []RBACRule
	for _, r := range p.rules {
		if grants(r.Permissions, perm) && id.Matches(r.Subjects) {
			out = append(out, r)
		}
	}
	return out
}

func grants(perms []string, perm Permission) bool {
	return slices.Contains(perms, string(perm)) || slices.Contains(perms, string(Admin))
}

// matchScope matches value against patterns; no patterns means all. The
// empty value ("all of them") only matches the pattern "*".
func matchScope(patterns []string, value string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if value == "" {
			if p == "*" {
				return true
			}
			continue
		}
		if ok, _ := path.Match(p, value); ok {
			return true
		}
	}
	return false
}

func subjectOf(id manent.Identity) string {
	if id.Subject == "" {
		return "an anonymous caller"
	}
	return id.Subject
}

func orAll(s string) string {
	if s == "" {
		return "*"
	}
	return s
}
