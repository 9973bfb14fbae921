package server

import (
	"net/http"
	"strings"

	"github.com/manent-io/manent/descriptor"
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
		if err := checkComment(req.Comment); err != nil {
			writeError(w, r, s.log, err)
			return
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

// MaxComment is the longest approval or rejection comment, in bytes.
const MaxComment = 4096

// checkComment refuses a comment longer than MaxComment, or holding a
// control character other than a line break or a tab: it is stored in the
// audit log and shown to every reader of the deploy.
func checkComment(c string) error {
	if len(c) > MaxComment {
		return manent.Errorf(manent.EInvalid, "comment is %d bytes, at most %d", len(c), MaxComment)
	}
	for i, line := range strings.Split(c, "\n") {
		if _, at, what, bad := descriptor.FirstControl(strings.ReplaceAll(line, "\t", " ")); bad {
			return manent.Errorf(manent.EInvalid, "comment line %d holds %s at character %d: only line breaks and tabs are allowed", i+1, what, at)
		}
	}
	return nil
}
