package server

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"strings"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/admit"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// withPositions gives the field errors of an admission refusal the line
// and column of their path in the descriptor's text, as Parse's own errors
// have (`manent validate` prints file:line:column for each).
func withPositions(body []byte, err error) {
	var e *manent.Error
	if errors.As(err, &e) && e.Code == manent.EInvalid {
		descriptor.Positions(body, e.Fields)
	}
}

// allProblems completes the refusal err of a descriptor with problems of
// its own (descriptor.ParseAll returned it beside them) with those the
// server's checks find on it — plugins and their settings, sources, the
// environment configuration — so that one answer lists every problem
// (SPEC §2), ordered by position; they take from the caller's
// limits.submissions_per_minute. Only for a caller allowed to submit (or
// dry-run) it: anyone else gets the descriptor's own problems, as before
// it authenticates (SPEC §3 order), and learns nothing of the server's
// configuration.
func (s *Server) allProblems(r *http.Request, body []byte, d *descriptor.Descriptor, dryRun bool, err error) error {
	var own *manent.Error
	header := r.Header.Get("Authorization")
	if d == nil || header == "" || !errors.As(err, &own) || own.Code != manent.EInvalid || r.Context().Err() != nil {
		return err
	}
	p, aerr := s.authenticateHeader(r, header)
	if aerr != nil {
		return err
	}
	perm := PermSubmit
	if dryRun {
		perm = PermDryRun
	}
	if s.cfg.Guard.Authorize(p, perm, d.Application, d.Environment) != nil {
		return err
	}
	// The server's checks ask the environment provider, DNS and the
	// policy: they take from the submissions' budget, and past it the
	// answer says they were not run.
	if ok, wait := s.limiter.Allow(p.Subject); !ok {
		return descriptor.Merge(body, own, []manent.FieldError{{Message: fmt.Sprintf(
			"the server's checks (plugins, sources, environment configuration) were not run on this descriptor: %s sent more than %.0f submissions, dry runs and rollbacks in a minute (limits.submissions_per_minute); fix these problems, or retry in %ds",
			p.Subject, s.limiter.PerMinute(), int(math.Ceil(wait.Seconds())))}})
	}
	more, perr := s.admit.Problems(r.Context(), admit.Request{Descriptor: d, Identity: p, DryRun: dryRun, RequestID: requestID(r)})
	if perr != nil {
		return err
	}
	return descriptor.Merge(body, own, more)
}

// handleSubmit runs the checks of SPEC §3 in order — the descriptor, then
// authentication, then the rest in pkg/admit — and either enqueues the
// deploy (202), creates a recurring schedule (201) or, with ?dry_run=true,
// answers the plan and the effective deploy without enqueueing.
func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request) {
	// query() let only dry_run through; a value other than true or false
	// (?dry_run=1, ?dry_run) meant a dry run and must never deploy.
	dryRun, bad := boolParam(r, "dry_run")
	if bad != nil {
		writeBadQuery(w, bad)
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); strings.HasPrefix(mt, "multipart/") {
		// A form upload (curl -F) wraps the file in a multipart envelope the
		// descriptor parser would report as nonsense. Any other type is
		// read as the descriptor itself: YAML or JSON, and what curl -d and
		// --data-binary send (application/x-www-form-urlencoded).
		writeStatus(w, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %s: send the descriptor as the request body itself (YAML or JSON), e.g. curl --data-binary @deploy.yml", mt))
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	// 1. Descriptor. It comes before authentication (SPEC §3 order), so an
	// anonymous request costs one Parse: bounded by MaxBody and linear in
	// it, at most 100 errors explained (SPEC §11.1 "Bounded work").
	d, err := descriptor.ParseAll(body)
	if err != nil {
		writeError(w, r, s.log, s.allProblems(r, body, d, dryRun, err))
		return
	}
	if r.Context().Err() != nil {
		return // the client went away while its descriptor was parsed: no more work for it
	}
	// 2. Identity; permissions and checks 3–6 are admission's.
	p, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	key, err := idempotencyKey(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if key != "" && !dryRun && s.replay(w, r, p, key, body) {
		return
	}
	// Permission first, so an identity that may not submit here learns
	// nothing from the rate limit; admission checks it again with the rest.
	perm := PermSubmit
	if dryRun {
		perm = PermDryRun
	}
	if err := s.cfg.Guard.Authorize(p, perm, d.Application, d.Environment); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	// A dry run takes from the same budget: it runs every check a
	// submission does (the environment provider, DNS, the policy).
	if !s.limitSubmission(w, r, p) {
		return
	}
	req := admit.Request{Descriptor: d, Identity: p, DryRun: dryRun, RequestID: requestID(r)}
	target := d.Application + "/" + d.Environment
	if d.Schedule != nil && d.Schedule.Cron != "" && !dryRun {
		// A recurring deploy: checks 3, 4 and the plan now, the rest at each tick.
		if _, err := s.admit.AdmitSchedule(r.Context(), req); err != nil {
			if key != "" && manent.ErrorCode(err) == manent.EInvalid && s.replay(w, r, p, key, body) {
				// A retry with this key created it meanwhile, and its
				// schedule now refuses this one as firing at the same
				// times: the retry's answer is the first one's.
				return
			}
			withPositions(body, err)
			writeError(w, r, s.log, err)
			return
		}
		s.createSchedule(w, r, body, d, p, key)
		return
	}
	adm, err := s.admit.Admit(r.Context(), req)
	if err != nil {
		withPositions(body, err)
		if !dryRun && manent.ErrorCode(err) != manent.EForbidden {
			s.audit(r.Context(), r, p, "deployment.submit", target, "refused", refusal(err))
		}
		writeError(w, r, s.log, err)
		return
	}
	in := adm.Input
	if dryRun {
		valid := true
		eff := map[string]any{}
		_ = json.Unmarshal(in.Effective, &eff)
		writeJSON(w, http.StatusOK, api.SubmitResult{Valid: &valid, Errors: []manent.FieldError{}, Plan: &in.Plan,
			Effective: eff, Notice: in.Notice, Decision: adm.Decision})
		return
	}
	var also []func(*sql.Tx, *store.Record) error
	if key != "" {
		also = append(also, func(tx *sql.Tx, rec *store.Record) error {
			return s.recordIdempotency(r.Context(), tx, p, key, body, http.StatusAccepted,
				api.SubmitResult{ID: rec.ID, State: rec.State, Notice: in.Notice})
		})
	}
	also = append(also, s.auditIn(r.Context(), r, p, "deployment.submit", target,
		func(rec *store.Record) string { return rec.ID + " " + rec.Version }))
	rec, err := s.eng.Submit(r.Context(), in, adm.Decision, also...)
	if errors.Is(err, store.ErrIdempotencyTaken) && s.replay(w, r, p, key, body) {
		return // a concurrent request with the same key won
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	s.log.Info("deploy accepted", "deploy", rec.ID, "application", rec.Application, "environment", rec.Environment,
		"version", rec.Version, "requester", rec.Requester)
	w.Header().Set("Location", "/api/v1/deployments/"+rec.ID)
	writeJSON(w, http.StatusAccepted, api.SubmitResult{ID: rec.ID, State: rec.State, Notice: in.Notice})
}
