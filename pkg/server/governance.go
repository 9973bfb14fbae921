package server

import (
	"net/http"
	"strings"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// ApproveRequest is the body of POST …/approve and …/reject.
type ApproveRequest struct {
	Comment    string `json:"comment"`
	PlanDigest string `json:"plan_digest"`
	// Wave, when present, pins what the verdict is for: the name of the
	// rollout wave the deploy must be waiting on, or "" for the deploy's
	// own approval. Absent, the verdict goes to whatever the deploy waits
	// for. A page rendered while one thing waited must not decide on the
	// next (the web UI always sends it).
	Wave *string `json:"wave"`
}

func (s *Server) handleApprove(verdict string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec, p, ok := s.deploymentAs(w, r, PermApprove)
		if !ok || !s.limitRefusals(w, r, p, "deployment."+verdict, rec.ID) {
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
		// What the deploy waits for, read once: the answer to the same
		// verdict again and the check of a pinned one speak of one state.
		// A failed read is no "no wave waits": it answers the fault (503
		// with Retry-After), nothing decided.
		waiting := ""
		if rec.State == manent.StatePending {
			if waiting, err = s.eng.WaitingWave(r.Context(), rec.ID); err != nil {
				writeError(w, r, s.log, err)
				return
			}
		}
		// The same verdict sent again by the identity that recorded it
		// (its answer lost: a 503 after the commit, then the client's
		// retry) is answered with the deploy as it is now, whatever it
		// waits for by then; another verdict is refused below (409).
		if same, err := s.sameVerdict(r, rec, req, p, verdict, waiting); err != nil {
			writeError(w, r, s.log, err)
			return
		} else if same {
			now, err := s.eng.Refresh(r.Context(), rec.ID)
			if err != nil {
				writeError(w, r, s.log, err)
				return
			}
			writeJSON(w, http.StatusOK, now.Deployment)
			return
		}
		var refused error
		if req.Wave != nil {
			refused = waitsFor(rec, *req.Wave, waiting)
		} else {
			refused = s.unpinnedAfterADecision(r, rec, p, verdict, waiting)
		}
		if err := refused; err != nil {
			s.auditRefused(r, p, "deployment."+verdict, rec.ID, err)
			writeError(w, r, s.log, err)
			return
		}
		// Judged for what waited when read above: the engine refuses it
		// when the deploy has moved on since (a wave approved elsewhere).
		after, err := s.eng.ApproveFor(r.Context(), rec.ID, p, manent.Approval{Verdict: verdict,
			Comment: req.Comment, PlanDigest: req.PlanDigest}, waiting)
		if err != nil {
			s.auditRefused(r, p, "deployment."+verdict, rec.ID, err)
			writeError(w, r, s.log, err)
			return
		}
		s.audit(r.Context(), r, p, "deployment."+verdict, rec.ID, "accepted", req.Comment)
		writeJSON(w, http.StatusOK, after.Deployment)
	}
}

// sameVerdict reports whether p already recorded verdict on what req is
// for: the wave it pins (its own approval for ""), or, unpinned, what the
// deploy waits for now (a wave's approval while one waits, else its own).
// A plan digest, when both name one, must be the same. waiting is the wave
// whose approval the deploy waits for ("" for none).
func (s *Server) sameVerdict(r *http.Request, rec *store.Record, req ApproveRequest, p manent.Identity, verdict, waiting string) (bool, error) {
	wave := waiting
	if req.Wave != nil {
		wave = *req.Wave
	}
	a, err := s.eng.Recorded(r.Context(), rec.ID, wave, p.Subject)
	if err != nil || a == nil {
		return false, err
	}
	return a.Verdict == verdict && (req.PlanDigest == "" || a.PlanDigest == "" || req.PlanDigest == a.PlanDigest), nil
}

// unpinnedAfterADecision refuses a verdict without "wave" from an identity
// that already gave that verdict on something else in this deploy (its own
// approval or another wave): the server cannot tell a new verdict on what
// waits now from the earlier one sent again after its answer was lost,
// which would then approve the wave the deploy reached meanwhile. The
// first verdict of an identity, unpinned, goes to what the deploy waits
// for; waiting is the wave whose approval it waits for ("" for none).
func (s *Server) unpinnedAfterADecision(r *http.Request, rec *store.Record, p manent.Identity, verdict, waiting string) error {
	decided, err := s.eng.Decided(r.Context(), rec.ID, p.Subject, verdict)
	if err != nil || len(decided) == 0 {
		return err
	}
	if waiting == "" && rec.State != manent.StateAwaitingApproval {
		return nil // it waits for no verdict: refused as such by Approve
	}
	what := func(wave string) string {
		if wave == "" {
			return "the deploy's own approval"
		}
		return "wave " + quote(manent.ClipText(wave, maxEchoed))
	}
	var before []string
	for _, wave := range decided {
		if wave != waiting {
			before = append(before, what(wave))
		}
	}
	if len(before) == 0 {
		return nil
	}
	return manent.Errorf(manent.EConflict, "%s already %sd %s in deploy %s, and this verdict names no wave: it may be that one sent again, not one for %s, which waits now; send {\"wave\": %s} to decide on it (manent %s --wave), or name what was decided to be answered with what was recorded",
		p.Subject, verdict, strings.Join(before, " and "), rec.ID, what(waiting), quote(manent.ClipText(waiting, maxEchoed)), verdict)
}

// waitsFor refuses a verdict pinned to wave ("" for the deploy's own
// approval) when the deploy waits for something else: waiting, the wave
// whose approval it waits for ("" for none).
func waitsFor(rec *store.Record, wave, waiting string) error {
	switch {
	case wave == "" && waiting != "":
		return manent.Errorf(manent.EConflict, "deploy %s no longer waits for its own approval: wave %s waits for its approval now; read the deploy again and decide on the wave", rec.ID, waiting)
	case wave != "" && waiting != wave:
		now := "it waits for no wave's approval (" + string(rec.State) + ")"
		if waiting != "" {
			now = "wave " + waiting + " waits now"
		}
		return manent.Errorf(manent.EConflict, "deploy %s does not wait for the approval of wave %s: %s; read the deploy again and decide on what waits", rec.ID, quote(manent.ClipText(wave, maxEchoed)), now)
	}
	return nil
}

// MaxComment is the longest approval or rejection comment, in bytes.
const MaxComment = api.MaxComment

// checkComment refuses a comment longer than MaxComment, or holding a
// control character other than a line break or a tab: it is stored in the
// audit log and shown to every reader of the deploy.
func checkComment(c string) error {
	if len(c) > MaxComment {
		return manent.Errorf(manent.EInvalid, "comment is %d bytes, at most %d (a character other than ASCII takes 2 to 4): shorten it", len(c), MaxComment)
	}
	for i, line := range strings.Split(c, "\n") {
		if _, at, what, bad := descriptor.FirstControl(strings.ReplaceAll(line, "\t", " ")); bad {
			return manent.Errorf(manent.EInvalid, "comment line %d holds %s at character %d: only line breaks and tabs are allowed", i+1, what, at)
		}
	}
	return nil
}
