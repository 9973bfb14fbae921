package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/governance"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/store"
)

// decide runs governance (SPEC §3 check 5): freezes, promotion, approvals,
// change management. It returns the decision to save, what the deploy
// waits for, and the problems that refuse it.
func (s *Server) decide(ctx context.Context, r *http.Request, d *descriptor.Descriptor, p manent.Identity, regions []string) (*manent.Decision, plan.Waits, []manent.FieldError) {
	var waits plan.Waits
	var problems []manent.FieldError
	// Waits of the descriptor itself.
	if d.Schedule != nil && d.Schedule.At != nil && d.Schedule.At.After(time.Now()) {
		at := d.Schedule.At.UTC()
		waits.At = &at
	}
	for i, dep := range d.After {
		if _, err := s.st.Deployment(ctx, dep); errors.Is(err, store.ErrNotFound) {
			problems = append(problems, manent.FieldError{Path: fmt.Sprintf("/after/%d", i), Message: fmt.Sprintf("deploy %s does not exist", dep)})
		} else if err != nil {
			problems = append(problems, manent.FieldError{Path: fmt.Sprintf("/after/%d", i), Message: err.Error()})
		}
	}
	waits.After = d.After

	decider := s.cfg.Governance
	if decider == nil {
		decider = governance.AllowAll{}
	}
	in := governance.Input{
		Descriptor:  d,
		Identity:    p,
		Environment: governance.Environment{Name: d.Environment, Regions: regions},
		Now:         time.Now().UTC(),
	}
	succ, err := s.st.Successes(ctx, d.Application, d.Version)
	if err != nil {
		return nil, waits, append(problems, manent.FieldError{Path: "/version", Message: err.Error()})
	}
	for _, r := range succ {
		in.Inventory.Successes = append(in.Inventory.Successes, governance.Success{Application: r.Application,
			Environment: r.Environment, Version: r.Version, DeploymentID: r.ID, FinishedAt: r.FinishedAt})
	}
	if cur, err := s.st.Current(ctx, d.Application, d.Environment); err == nil {
		in.Inventory.Current = cur
	}
	dec, err := decider.Decide(ctx, in)
	if err != nil {
		s.log.Error("governance decision failed", "error", err)
		return nil, waits, append(problems, manent.FieldError{Path: "/", Message: "the governance policy could not decide: " + err.Error()})
	}
	out := dec.ToDecision()
	if !dec.Allowed || len(dec.Deny) > 0 {
		for _, reason := range dec.Deny {
			problems = append(problems, manent.FieldError{Path: "/", Message: "policy: " + reason})
		}
		if dec.Freeze != nil && !dec.BreakGlass {
			problems = append(problems, manent.FieldError{Path: "/environment", Message: fmt.Sprintf("environment %s is frozen by %q until %s",
				d.Environment, dec.Freeze.Name, dec.Freeze.ReopensAt.UTC().Format(time.RFC3339))})
		}
		if len(problems) == 0 {
			problems = append(problems, manent.FieldError{Path: "/", Message: "refused by the governance policy"})
		}
	}
	if dec.ChangeRequired {
		if s.cfg.ChangeManagement {
			waits.Change = true
		} else {
			problems = append(problems, manent.FieldError{Path: "/environment",
				Message: "a change ticket is required for " + d.Environment + " but this server has no ITSM provider (itsm.url)"})
		}
	}
	if dec.BreakGlass && dec.Freeze != nil && len(problems) == 0 {
		s.audit(ctx, r, p, "governance.break-glass", d.Application+"/"+d.Environment, "allowed",
			fmt.Sprintf("%s bypassed freeze %q (reopens %s)", p.Subject, dec.Freeze.Name, dec.Freeze.ReopensAt.UTC().Format(time.RFC3339)))
		s.log.Warn("BREAK GLASS: a deploy bypasses a freeze", "identity", p.Subject, "freeze", dec.Freeze.Name,
			"application", d.Application, "environment", d.Environment)
	}
	if dec.Approvals != nil && dec.Approvals.Count > 0 {
		waits.Approvals = &plan.ApprovalRule{Count: dec.Approvals.Count, Approvers: dec.Approvals.Approvers, Expires: dec.Approvals.Expires.D()}
		out.ApprovalsExpire = dec.Approvals.Expires.D().String()
	}
	return out, waits, problems
}

// ApproveRequest is the body of POST …/approve and …/reject.
type ApproveRequest struct {
	Comment    string `json:"comment"`
	PlanDigest string `json:"plan_digest"`
}

func (s *Server) handleApprove(verdict string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec, p, ok := s.deploymentAs(w, r, PermApprove)
		if !ok {
			return
		}
		body, err := readBody(w, r)
		if err != nil {
			writeError(w, r, s.log, err)
			return
		}
		var req ApproveRequest
		if len(body) > 0 {
			if err := jsonUnmarshalStrict(body, &req); err != nil {
				writeError(w, r, s.log, manent.Errorf(manent.EInvalid, "body: %v", err))
				return
			}
		}
		after, err := s.eng.Approve(r.Context(), rec.ID, p, manent.Approval{Verdict: verdict,
			Comment: req.Comment, PlanDigest: req.PlanDigest})
		if err != nil {
			s.audit(r.Context(), r, p, "deployment."+verdict, rec.ID, "refused", manent.ErrorMessage(err))
			writeError(w, r, s.log, err)
			return
		}
		s.audit(r.Context(), r, p, "deployment."+verdict, rec.ID, "accepted", req.Comment)
		writeJSON(w, http.StatusOK, after.Deployment)
	}
}
