package governance

import (
	"slices"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/manent"
)

// Decision is the outcome of the governance check for one deploy. Its JSON
// form is also what a Rego policy returns (see docs/governance.md); Source
// is set by the package, never by the policy.
type Decision struct {
	// Allowed is true when nothing denies the deploy. An allowed deploy
	// may still wait for approvals or a change ticket.
	Allowed bool `json:"allowed"`
	// Deny lists why the deploy is refused, sorted; empty when allowed.
	Deny []string `json:"deny,omitempty"`
	// Approvals, when not nil, is what the deploy must collect before it
	// is enqueued (AWAITING_APPROVAL).
	Approvals *Approvals `json:"approvals,omitempty"`
	// ChangeRequired says an ITSM change ticket must be opened and
	// approved before the deploy runs.
	ChangeRequired bool `json:"change_required"`
	// Freeze is the active freeze window that concerns the deploy: the
	// one that blocks it or, with BreakGlass, the one it bypasses. When
	// several are active it is the one that reopens last.
	Freeze *FreezeInfo `json:"freeze,omitempty"`
	// BreakGlass is true when the submitter is in the `allow` list of
	// every active freeze: the deploy is not blocked, and the server must
	// write a loud audit entry naming Freeze.
	BreakGlass bool `json:"break_glass"`
	// MissingPromotions are the environments where the same application
	// and version has not succeeded yet although a promotion rule
	// requires it, sorted.
	MissingPromotions []string `json:"missing_promotions,omitempty"`
	// Source names what decided: "rules:<file>", "rego:<file>" or "none".
	Source string `json:"source,omitempty"`
}

// AnyApprover is the approvers list of an approval rule that names none:
// any identity the RBAC lets approve.
const AnyApprover = "*"

// Approvals is what a deploy waiting for approval must collect.
type Approvals struct {
	// Count is how many distinct identities, other than the submitter,
	// must approve.
	Count int `json:"count"`
	// Approvers are the identity patterns allowed to approve: subjects
	// ("oidc:*@example.com") or groups ("group:sre"), matched by
	// manent.Identity.Matches. A rule or policy that names no approvers
	// means any identity the RBAC lets approve: the decision says so
	// explicitly with ["*"] (normalized), because an empty list matches no one.
	Approvers []string `json:"approvers,omitempty"`
	// Expires is how long the deploy waits before it becomes EXPIRED;
	// zero leaves it to the server's default.
	Expires descriptor.Duration `json:"expires,omitempty"`
}

// CanApprove reports whether id matches one of the approver patterns.
// Excluding the submitter and counting each identity once is the waiting
// workflow's job.
func (a *Approvals) CanApprove(id manent.Identity) bool {
	return a != nil && id.Matches(a.Approvers)
}

// FreezeInfo names an active freeze window and when it reopens.
type FreezeInfo struct {
	Name      string    `json:"name"`
	ReopensAt time.Time `json:"reopens_at"`
}

// ToDecision returns the decision as the domain type saved with the deploy.
// A blocking freeze is named as is; a bypassed one as "<name> (break glass)".
func (d Decision) ToDecision() *manent.Decision {
	out := &manent.Decision{
		Allowed:        d.Allowed,
		Deny:           slices.Clone(d.Deny),
		ChangeRequired: d.ChangeRequired,
		Source:         d.Source,
	}
	if d.Approvals != nil {
		out.ApprovalsRequired = d.Approvals.Count
		out.Approvers = slices.Clone(d.Approvals.Approvers)
	}
	if d.Freeze != nil {
		out.Freeze = d.Freeze.Name
		if d.BreakGlass {
			out.Freeze += " (break glass)"
		}
	}
	return out
}

// normalized puts d in its canonical form, the same whichever engine
// produced it: sorted, de-duplicated lists, nil when empty; no approvals
// when none are required; times in UTC; Allowed false whenever something
// denies.
func (d Decision) normalized() Decision {
	d.Deny = sortedSet(d.Deny)
	d.MissingPromotions = sortedSet(d.MissingPromotions)
	if d.Approvals != nil {
		if d.Approvals.Count <= 0 {
			d.Approvals = nil
		} else {
			a := *d.Approvals
			a.Approvers = sortedSet(a.Approvers)
			if len(a.Approvers) == 0 {
				a.Approvers = []string{AnyApprover}
			}
			d.Approvals = &a
		}
	}
	if d.Freeze != nil {
		f := *d.Freeze
		f.ReopensAt = f.ReopensAt.UTC()
		d.Freeze = &f
	}
	if len(d.Deny) > 0 {
		d.Allowed = false
	}
	return d
}

func sortedSet(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
