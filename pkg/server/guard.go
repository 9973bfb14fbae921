package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"strings"

	"github.com/manent-io/manent/pkg/manent"
)

// Principal is an authenticated caller.
type Principal struct {
	Subject string   `json:"subject"`
	Groups  []string `json:"groups,omitempty"`
}

// Guard authenticates requests and authorises actions. Every route asks it.
type Guard interface {
	Authenticate(ctx context.Context, authorization string) (Principal, error)
	Authorize(p Principal, permission, application, environment string) error
	// AuthorizeCluster checks agent.report on one cluster.
	AuthorizeCluster(p Principal, cluster string) error
}

// Permissions (SPEC §8.1).
const (
	PermSubmit   = "deployment.submit"
	PermDryRun   = "deployment.dry-run"
	PermRead     = "deployment.read"
	PermCancel   = "deployment.cancel"
	PermApprove  = "deployment.approve"
	PermSchedule = "schedule.manage"
	PermAgent    = "agent.report"
	PermAudit    = "audit.read"
	PermAdmin    = "admin"
)

// AdminGuard accepts only the bootstrap admin token (local trial mode) and
// grants it every permission. The token is kept as its sha256 and compared
// in constant time.
type AdminGuard struct {
	hash [32]byte
}

// NewAdminGuard returns a guard for one admin token.
func NewAdminGuard(token string) *AdminGuard {
	return &AdminGuard{hash: sha256.Sum256([]byte(token))}
}

// Authenticate checks the bearer token.
func (g *AdminGuard) Authenticate(_ context.Context, authorization string) (Principal, error) {
	tok, ok := bearer(authorization)
	if !ok {
		return Principal{}, manent.Errorf(manent.EUnauthorized, "missing bearer token: send Authorization: Bearer <token>")
	}
	h := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(h[:], g.hash[:]) != 1 {
		return Principal{}, manent.Errorf(manent.EUnauthorized, "invalid token")
	}
	return Principal{Subject: "token:admin", Groups: []string{"admins"}}, nil
}

// Authorize grants the admin everything.
func (g *AdminGuard) Authorize(p Principal, permission, application, environment string) error {
	if p.Subject == "token:admin" {
		return nil
	}
	return manent.Errorf(manent.EForbidden, "%s may not %s on %s/%s", p.Subject, permission, application, environment)
}

// AuthorizeCluster grants the admin every cluster.
func (g *AdminGuard) AuthorizeCluster(p Principal, cluster string) error {
	return g.Authorize(p, PermAgent, "", "")
}

// TokenHash returns the hex sha256 of a token, as stored in configuration.
func TokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
