package server

import (
	"context"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/manent"
)

// Guard authenticates requests and authorises actions. Every route asks it.
type Guard interface {
	Authenticate(ctx context.Context, authorization string) (manent.Identity, error)
	Authorize(p manent.Identity, permission, application, environment string) error
	// AuthorizeSomewhere checks permission on application in some
	// environment (environment "") or on environment in some application
	// (application ""): a read filter naming only one of them.
	AuthorizeSomewhere(p manent.Identity, permission, application, environment string) error
	// AuthorizeCluster checks agent.report on one cluster.
	AuthorizeCluster(p manent.Identity, cluster string) error
}

// Permissions (SPEC §8.1).
const (
	PermSubmit   = string(auth.DeploymentSubmit)
	PermDryRun   = string(auth.DeploymentDryRun)
	PermRead     = string(auth.DeploymentRead)
	PermCancel   = string(auth.DeploymentCancel)
	PermApprove  = string(auth.DeploymentApprove)
	PermSchedule = string(auth.ScheduleManage)
	PermAgent    = string(auth.AgentReport)
	PermAudit    = string(auth.AuditRead)
	PermAdmin    = string(auth.Admin)
)

// AuthGuard is the Guard of a running server: static tokens and OIDC
// (pkg/auth.Authenticator) and RBAC (pkg/auth.Policy).
type AuthGuard struct {
	Authn  *auth.Authenticator
	Policy *auth.Policy
}

// NewAdminGuard returns a guard that knows only the bootstrap admin token
// (local trial mode), which may do everything.
func NewAdminGuard(token string) *AuthGuard {
	a, err := auth.New(auth.Config{BootstrapToken: token})
	if err != nil {
		panic("admin guard: " + err.Error()) // only an empty token fails, a programming error
	}
	p, err := auth.NewPolicy([]auth.RBACRule{auth.BootstrapRule()})
	if err != nil {
		panic("admin guard: " + err.Error())
	}
	return &AuthGuard{Authn: a, Policy: p}
}

// Authenticate checks the bearer token (401 as *manent.Error).
func (g *AuthGuard) Authenticate(ctx context.Context, authorization string) (manent.Identity, error) {
	return g.Authn.Authenticate(ctx, authorization)
}

// Authorize checks permission on application/environment (403 as *manent.Error).
func (g *AuthGuard) Authorize(p manent.Identity, permission, application, environment string) error {
	return g.Policy.Authorize(p, auth.Permission(permission), application, environment)
}

// AuthorizeSomewhere checks permission on application or environment
// somewhere (403 as *manent.Error).
func (g *AuthGuard) AuthorizeSomewhere(p manent.Identity, permission, application, environment string) error {
	return g.Policy.AuthorizeSomewhere(p, auth.Permission(permission), application, environment)
}

// AuthorizeCluster checks agent.report on cluster.
func (g *AuthGuard) AuthorizeCluster(p manent.Identity, cluster string) error {
	return g.Policy.AuthorizeCluster(p, cluster)
}
