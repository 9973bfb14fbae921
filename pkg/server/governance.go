package server

import (
	"net/http"

	"github.com/manent-io/manent/pkg/manent"
)

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
			s.audit(r.Context(), r, p, "deployment."+verdict, rec.ID, "refused", refusal(err))
			writeError(w, r, s.log, err)
			return
		}
		s.audit(r.Context(), r, p, "deployment."+verdict, rec.ID, "accepted", req.Comment)
		writeJSON(w, http.StatusOK, after.Deployment)
	}
}
