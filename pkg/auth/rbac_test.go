package auth

import (
	"slices"
	"testing"

	"github.com/manent-io/manent/pkg/manent"
)

func testPolicy(t *testing.T) *Policy {
	t.Helper()
	p, err := NewPolicy([]RBACRule{
		{ // SPEC §8.1's example
			Subjects:     []string{"token:ci", "group:deployers"},
			Permissions:  []string{"deployment.submit", "deployment.read"},
			Applications: []string{"*"},
			Environments: []string{"staging", "prod"},
		},
		{
			Subjects:     []string{"oidc:*@example.com"},
			Permissions:  []string{"deployment.read", "deployment.dry-run"},
			Applications: []string{"billing", "pay-*"},
		},
		{
			Subjects:     []string{"group:sre"},
			Permissions:  []string{"deployment.approve", "deployment.cancel"},
			Applications: []string{"*"},
			Environments: []string{"prod"},
		},
		{
			Subjects:    []string{"group:admins"},
			Permissions: []string{"admin"},
		},
		{
			Subjects:    []string{"token:agent-eu"},
			Permissions: []string{"agent.report"},
			Clusters:    []string{"eu-*"},
		},
		{
			Subjects:    []string{"token:agent-any"},
			Permissions: []string{"agent.report"},
		},
		{
			Subjects:     []string{"token:auditor"},
			Permissions:  []string{"audit.read"},
			Applications: []string{"*"},
			Environments: []string{"*"},
		},
		{
			Subjects:     []string{"token:billing-auditor"},
			Permissions:  []string{"audit.read"},
			Applications: []string{"billing"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPolicyAllowed(t *testing.T) {
	p := testPolicy(t)
	ci := manent.Identity{Subject: "token:ci"}
	deployer := manent.Identity{Subject: "token:gitlab", Groups: []string{"deployers"}}
	alice := manent.Identity{Subject: "oidc:alice@example.com", Groups: []string{"sre"}}
	mallory := manent.Identity{Subject: "oidc:mallory@example.com.evil"}
	admin := manent.Identity{Subject: BootstrapSubject, Groups: []string{"admins"}}
	tests := []struct {
		name     string
		id       manent.Identity
		perm     Permission
		app, env string
		want     bool
	}{
		{"token subject, granted", ci, DeploymentSubmit, "billing", "prod", true},
		{"token subject, other environment", ci, DeploymentSubmit, "billing", "dev", false},
		{"token subject, permission not granted", ci, DeploymentCancel, "billing", "prod", false},
		{"group subject", deployer, DeploymentSubmit, "search", "staging", true},
		{"group does not leak to other perms", deployer, DeploymentApprove, "search", "prod", false},
		{"oidc glob subject, app glob", alice, DeploymentDryRun, "pay-gateway", "dev", true},
		{"oidc glob subject, app literal", alice, DeploymentRead, "billing", "prod", true},
		{"app glob does not match", alice, DeploymentRead, "search", "prod", false},
		{"oidc glob is anchored", mallory, DeploymentRead, "billing", "prod", false},
		{"oidc group", alice, DeploymentApprove, "search", "prod", true},
		{"oidc group, wrong env", alice, DeploymentApprove, "search", "staging", false},
		{"admin implies everything", admin, DeploymentCancel, "anything", "anywhere", true},
		{"admin implies global perms", admin, AuditRead, "", "", true},
		{"global perm needs an unrestricted rule", manent.Identity{Subject: "token:auditor"}, AuditRead, "", "", true},
		{"restricted rule does not grant global", manent.Identity{Subject: "token:billing-auditor"}, AuditRead, "", "", false},
		{"restricted rule grants its scope", manent.Identity{Subject: "token:billing-auditor"}, AuditRead, "billing", "prod", true},
		{"unknown identity", manent.Identity{Subject: "token:nobody"}, DeploymentRead, "billing", "prod", false},
		{"empty identity", manent.Identity{}, DeploymentRead, "billing", "prod", false},
		{"group named like a subject", manent.Identity{Subject: "token:x", Groups: []string{"token:ci"}}, DeploymentSubmit, "billing", "prod", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.Allowed(tt.id, tt.perm, tt.app, tt.env); got != tt.want {
				t.Fatalf("Allowed(%s, %s, %s/%s) = %v, want %v", tt.id, tt.perm, tt.app, tt.env, got, tt.want)
			}
			err := p.Authorize(tt.id, tt.perm, tt.app, tt.env)
			if got := err == nil; got != tt.want {
				t.Fatalf("Authorize = %v, want allowed=%v", err, tt.want)
			}
			if err != nil && manent.ErrorCode(err) != manent.EForbidden {
				t.Fatalf("Authorize code = %s, want forbidden", manent.ErrorCode(err))
			}
		})
	}
}

func TestPolicyAuthorizeMessage(t *testing.T) {
	p := testPolicy(t)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"app/env", p.Authorize(manent.Identity{Subject: "token:ci"}, DeploymentCancel, "billing", "prod"), "token:ci may not deployment.cancel on billing/prod"},
		{"global", p.Authorize(manent.Identity{Subject: "token:ci"}, AuditRead, "", ""), "token:ci may not audit.read"},
		{"cluster", p.AuthorizeCluster(manent.Identity{Subject: "token:agent-eu"}, "us-1"), "token:agent-eu may not agent.report on cluster us-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil || tt.err.Error() != tt.want {
				t.Fatalf("got %v, want %q", tt.err, tt.want)
			}
		})
	}
}

func TestPolicyClusters(t *testing.T) {
	p := testPolicy(t)
	tests := []struct {
		name    string
		id      manent.Identity
		cluster string
		want    bool
	}{
		{"scoped agent, its cluster", manent.Identity{Subject: "token:agent-eu"}, "eu-1", true},
		{"scoped agent, another cluster", manent.Identity{Subject: "token:agent-eu"}, "us-1", false},
		{"unscoped agent, any cluster", manent.Identity{Subject: "token:agent-any"}, "us-1", true},
		{"admin, any cluster", manent.Identity{Subject: "token:root", Groups: []string{"admins"}}, "ap-3", true},
		{"deployer may not report", manent.Identity{Subject: "token:ci"}, "eu-1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.AllowedCluster(tt.id, tt.cluster); got != tt.want {
				t.Fatalf("AllowedCluster(%s, %s) = %v, want %v", tt.id, tt.cluster, got, tt.want)
			}
			if got := p.AuthorizeCluster(tt.id, tt.cluster) == nil; got != tt.want {
				t.Fatalf("AuthorizeCluster allowed = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPolicyCanRead(t *testing.T) {
	p := testPolicy(t)
	alice := manent.Identity{Subject: "oidc:alice@example.com"}
	var got []string
	for _, d := range []struct{ app, env string }{{"billing", "prod"}, {"search", "prod"}, {"pay-api", "dev"}} {
		if p.CanRead(alice, d.app, d.env) {
			got = append(got, d.app+"/"+d.env)
		}
	}
	if want := []string{"billing/prod", "pay-api/dev"}; !slices.Equal(got, want) {
		t.Fatalf("readable = %v, want %v", got, want)
	}
}

func TestPolicyZeroAndBootstrap(t *testing.T) {
	var zero Policy
	if zero.Allowed(manent.Identity{Subject: BootstrapSubject}, DeploymentRead, "a", "b") {
		t.Fatal("the zero policy allows something")
	}
	p, err := NewPolicy([]RBACRule{BootstrapRule()})
	if err != nil {
		t.Fatal(err)
	}
	boot := manent.Identity{Subject: BootstrapSubject, Groups: []string{"admins"}}
	for _, perm := range Permissions() {
		if !p.Allowed(boot, perm, "billing", "prod") || !p.Allowed(boot, perm, "", "") {
			t.Fatalf("bootstrap identity lacks %s", perm)
		}
	}
	if !p.AllowedCluster(boot, "eu-1") {
		t.Fatal("bootstrap identity may not report")
	}
	if p.Allowed(manent.Identity{Subject: "token:ci", Groups: []string{"admins"}}, DeploymentRead, "a", "b") {
		t.Fatal("BootstrapRule grants the admins group, want the bootstrap subject only")
	}
}

func TestNewPolicyValidation(t *testing.T) {
	tests := []struct {
		name  string
		rules []RBACRule
		want  []string
	}{
		{"ok", []RBACRule{{Subjects: []string{"*"}, Permissions: []string{"deployment.read"}}}, nil},
		{"no subjects", []RBACRule{{Permissions: []string{"admin"}}}, []string{"rbac[0].subjects"}},
		{"no permissions", []RBACRule{{Subjects: []string{"token:ci"}}}, []string{"rbac[0].permissions"}},
		{"unknown permission", []RBACRule{{Subjects: []string{"token:ci"}, Permissions: []string{"deployment.read", "deploy"}}}, []string{"rbac[0].permissions[1]"}},
		{"bad glob", []RBACRule{{Subjects: []string{"token:ci"}, Permissions: []string{"admin"}, Applications: []string{"[billing"}}}, []string{"rbac[0].applications[0]"}},
		// A subject no identity can have granted nothing, silently.
		{"subject without a kind", []RBACRule{{Subjects: []string{"token:ci", "ci"}, Permissions: []string{"admin"}}}, []string{"rbac[0].subjects[1]"}},
		{"subject of an unknown kind", []RBACRule{{Subjects: []string{"tokens:ci", "user:alice@example.com"}, Permissions: []string{"admin"}}}, []string{"rbac[0].subjects[0]", "rbac[0].subjects[1]"}},
		{"subject patterns", []RBACRule{{Subjects: []string{"*", "*:ci", "t*:ci", "oidc:*@example.com", "group:*"}, Permissions: []string{"admin"}}}, nil},
		{"empty pattern", []RBACRule{{Subjects: []string{"token:ci"}, Permissions: []string{"admin"}, Clusters: []string{""}}}, []string{"rbac[0].clusters[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPolicy(tt.rules)
			if got := fieldPaths(err); !slices.Equal(got, tt.want) {
				t.Fatalf("got field errors %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}
