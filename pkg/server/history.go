package server

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/admit"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/store"
)

// History, rollback and DORA (SPEC §11.5).
func (s *Server) routesHistory() {
	s.handle(route{Pattern: "GET /api/v1/environments/{application}/{environment}/history", Params: []string{"limit", "cursor"}}, s.handleHistory)
	s.handle(route{Pattern: "GET /api/v1/environments/{application}/{environment}/current"}, s.handleCurrent)
	s.handle(route{Pattern: "GET /api/v1/deployments/{id}/effective"}, s.handleEffective)
	s.handle(route{Pattern: "POST /api/v1/environments/{application}/{environment}/rollback", JSON: true}, s.handleRollback)
	s.handle(route{Pattern: "GET /api/v1/metrics/dora", Params: []string{"application", "environment", "window"}}, s.handleDORA)
	s.handle(route{Pattern: "GET /api/v1/version"}, s.handleVersion) // version.go
}

// environmentAs authenticates the caller and checks perm on the route's
// application/environment.
func (s *Server) environmentAs(w http.ResponseWriter, r *http.Request, perm string) (app, env string, p manent.Identity, ok bool) {
	p, ok = s.authenticate(w, r)
	if !ok {
		return "", "", p, false
	}
	app, env = r.PathValue("application"), r.PathValue("environment")
	// A name no descriptor may have (a typo's "Billing") is a 422 naming
	// the rule, not an empty history of an environment that cannot exist.
	if err := invalidNames("in the path", app, env, false); err != nil {
		writeError(w, r, s.log, err)
		return "", "", p, false
	}
	if err := s.cfg.Guard.Authorize(p, perm, app, env); err != nil {
		writeError(w, r, s.log, err)
		return "", "", p, false
	}
	return app, env, p, true
}

// invalidNames is the 422 of an application or environment name no
// descriptor may have, nil when both are valid; with optional, an empty
// one is an absent filter.
func invalidNames(where, app, env string, optional bool) error {
	var bad []manent.FieldError
	for _, n := range []struct{ field, v string }{{"application", app}, {"environment", env}} {
		if !descriptor.ValidName(n.v) && (n.v != "" || !optional) {
			bad = append(bad, manent.FieldError{Path: "/" + n.field,
				Message: fmt.Sprintf("%s is not a valid %s name: %s", quote(manent.ClipText(n.v, maxEchoed)), n.field, descriptor.NameRule)})
		}
	}
	if len(bad) > 0 {
		return &manent.Error{Code: manent.EInvalid, Message: "invalid application/environment " + where, Fields: bad}
	}
	return nil
}

func (s *Server) handleHistory(w http.ResponseWriter, r *http.Request) {
	app, env, _, ok := s.environmentAs(w, r, PermRead)
	if !ok {
		return
	}
	f := store.Filter{Application: app, Environment: env, Cursor: r.URL.Query().Get("cursor")}
	var err error
	if f.Limit, err = limitParam(r, api.MaxPage, 0); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	cur, err := s.st.Current(r.Context(), app, env)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	recs, next, err := s.st.List(r.Context(), f)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, wireHistory(app, env, cur, recs, next))
}

func (s *Server) handleCurrent(w http.ResponseWriter, r *http.Request) {
	app, env, _, ok := s.environmentAs(w, r, PermRead)
	if !ok {
		return
	}
	cur, err := s.st.Current(r.Context(), app, env)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if cur == nil {
		writeError(w, r, s.log, manent.Errorf(manent.ENotFound, "%s/%s has no current release yet", app, env))
		return
	}
	rec, err := s.st.Deployment(r.Context(), cur.DeploymentID)
	if err != nil {
		writeError(w, r, s.log, fmt.Errorf("current release of %s/%s: %w", app, env, err))
		return
	}
	var in plan.Input
	if err := json.Unmarshal(rec.Input, &in); err != nil {
		writeError(w, r, s.log, fmt.Errorf("current release of %s/%s: decode input: %w", app, env, err))
		return
	}
	writeJSON(w, http.StatusOK, wireCurrent(app, env, cur, in))
}

// handleEffective answers the effective deploy a deploy was admitted with
// (api.EffectiveResult): what it ran with, long after its environment's
// configuration or its descriptor changed.
func (s *Server) handleEffective(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.deployment(w, r, PermRead)
	if !ok {
		return
	}
	var in plan.Input
	if err := json.Unmarshal(rec.Input, &in); err != nil {
		writeError(w, r, s.log, fmt.Errorf("deploy %s: decode input: %w", rec.ID, err))
		return
	}
	if len(in.Effective) == 0 || string(in.Effective) == "null" {
		writeError(w, r, s.log, manent.Errorf(manent.ENotFound, "deploy %s has no recorded effective deploy: it was admitted by a release that did not keep it", rec.ID))
		return
	}
	writeJSON(w, http.StatusOK, wireEffective(rec.Deployment, in.Effective))
}

// handleRollback submits a new deploy of an earlier release with the
// descriptor that release was deployed with (SPEC §11.5), through the same
// admission as any submission: RBAC as a submit, every check, governance.
// deployAhead is the refusal of a rollback while a deploy of the
// environment is queued or running.
func deployAhead(target string, a store.InFlight) error {
	return manent.Errorf(manent.EConflict, "deploy %s (version %s) is %s on %s: it runs before a rollback submitted now and would change the current release under it; wait for it (manent wait %s) or cancel it (manent cancel %s), then roll back",
		a.ID, a.Version, a.State, target, a.ID, a.ID)
}

// rollbackWaiting is the refusal of a rollback while rollback a of the same
// release (rollbackOf) waits for its approval on target.
func rollbackWaiting(target, rollbackOf string, a store.InFlight) error {
	return manent.Errorf(manent.EConflict, "rollback %s (version %s) of %s waits for its approval on %s: a second rollback of that release is not queued; approve it (manent approve %s), or reject it (manent reject %s) and roll back again",
		a.ID, a.Version, rollbackOf, target, a.ID, a.ID)
}

// reusedRefused says, of the checks' refusal of a rollback, whose
// descriptor they refused: the caller sent none, and the problems' paths
// point into the old deploy's descriptor, checked against today's
// configuration and rules.
func reusedRefused(err error, from *store.Record) error {
	var me *manent.Error
	if !errors.As(err, &me) || me.Code != manent.EInvalid {
		return err
	}
	out := *me
	out.Message = fmt.Sprintf("the descriptor of deploy %s (version %s), which the rollback deploys again, was refused by today's checks: %s; "+
		"to go back to %s, fix these in its deploy.yml and submit it with manent deploy",
		from.ID, from.Version, strings.TrimPrefix(me.Message, "the deploy was refused: "), from.Version)
	return &out
}

func (s *Server) handleRollback(w http.ResponseWriter, r *http.Request) {
	app, env, p, ok := s.environmentAs(w, r, PermSubmit)
	if !ok {
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var req api.RollbackRequest
	if len(body) > 0 {
		// api.RollbackRequest, read once with its "to" as a pointer (the
		// outer field hides the embedded one): an explicit empty "to" is a
		// script's {"to": "$VERSION"} with VERSION unset, not a request for
		// the release before the current one (as `manent rollback --to ""`
		// is refused, docs/cli.md).
		var given struct {
			api.RollbackRequest
			To *string `json:"to"`
		}
		if err := jsonUnmarshalStrict(body, &given); err != nil {
			writeError(w, r, s.log, manent.Errorf(manent.EInvalid, "rollback request: %v (want {\"to\": \"<version>\"} or nothing)", err))
			return
		}
		req = given.RollbackRequest
		if given.To != nil {
			req.To = *given.To
		}
		if given.To != nil && *given.To == "" {
			writeError(w, r, s.log, &manent.Error{Code: manent.EInvalid, Message: "invalid rollback request",
				Fields: []manent.FieldError{{Path: "/to", Message: `"to" is empty: name a version (e.g. {"to": "1.3.0"}), or leave "to" out ({} or no body) to roll back to the release before the current one`}}})
			return
		}
	}
	// A "to" no deploy's version can be is refused before it is looked
	// for: the 409 of an unknown version (and its audit entry, kept for
	// good) would otherwise echo it whole, escape sequences and all.
	if problem := descriptor.VersionProblem(req.To); req.To != "" && problem != "" {
		writeError(w, r, s.log, &manent.Error{Code: manent.EInvalid, Message: "invalid rollback request",
			Fields: []manent.FieldError{{Path: "/to", Message: fmt.Sprintf("%s is not a version: %s", quote(manent.ClipText(req.To, maxEchoed)), problem)}}})
		return
	}
	// Idempotency-Key (SPEC §11.1), as for a submission: a repeat gets the
	// first answer (the same deploy) before anything is computed again.
	key, err := idempotencyKey(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	keyed := rollbackDigestBody(r, body)
	if key != "" && s.replay(w, r, p, key, keyed) {
		return
	}
	if !s.limitSubmission(w, r, p) {
		return
	}
	target := app + "/" + env
	refuse := func(err error) {
		s.audit(r.Context(), r, p, "deployment.rollback", target, "refused", refusal(err))
		writeError(w, r, s.log, err)
	}
	// A deploy queued or running on the environment would run before the
	// rollback and change the current release under it: the rollback would
	// then replace a release it was never asked to replace. This comes
	// before what the rollback would deploy: while that deploy runs, the
	// current release is not settled, and "already the current release",
	// "never ended SUCCESS" or "nothing to roll back to" (a wave activated
	// the new release on some targets already) would tell the one on call
	// there is nothing to do, when the deploy ahead is what to wait for or
	// cancel.
	ahead, _, err := s.st.List(r.Context(), store.Filter{Application: app, Environment: env,
		States: []manent.State{manent.StateEnqueued, manent.StatePending}, Limit: 1})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if len(ahead) > 0 && key != "" && s.replay(w, r, p, key, keyed) {
		return // the deploy ahead is this key's rollback, accepted by a concurrent request
	}
	if len(ahead) > 0 {
		a := ahead[0]
		refuse(deployAhead(target, store.InFlight{ID: a.ID, Version: a.Version, State: a.State}))
		return
	}
	cur, err := s.st.Current(r.Context(), app, env)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if cur == nil {
		refuse(manent.Errorf(manent.EConflict, "%s has no current release: there is nothing to roll back", target))
		return
	}
	var from *store.Record
	switch {
	case req.To == "":
		from, err = s.st.ReleaseBefore(r.Context(), app, env, *cur)
		if err == nil && from == nil {
			refuse(manent.Errorf(manent.EConflict, "%s has no SUCCESS deploy of another version before the current release %s (%s): there is nothing to roll back to",
				target, cur.Version, cur.DeploymentID))
			return
		}
	default:
		from, err = s.st.LatestSuccess(r.Context(), app, env, req.To)
		if err == nil && from == nil {
			refuse(manent.Errorf(manent.EConflict, "version %s never ended SUCCESS in %s: there is nothing to roll back to", req.To, target))
			return
		}
		// Only the deploy that is the current release is "already" it: a
		// current release of the same version that failed and stayed live
		// goes back to that version's last SUCCESS.
		if err == nil && from.ID == cur.DeploymentID {
			refuse(manent.Errorf(manent.EConflict, "version %s is already the current release of %s (%s)", req.To, target, cur.DeploymentID))
			return
		}
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var stored plan.Input
	if err := json.Unmarshal(from.Input, &stored); err != nil || stored.Descriptor == nil {
		writeError(w, r, s.log, fmt.Errorf("deploy %s: its stored descriptor cannot be read: %v", from.ID, err))
		return
	}
	d := *stored.Descriptor
	// The release is the bytes that were deployed, not what its URL serves
	// today: a descriptor without artifact.sha256 is pinned to the digest
	// that deploy recorded, so changed bytes fail the artifacts step.
	if d.Artifact.SHA256 == "" {
		d.Artifact.SHA256 = from.ArtifactSHA256
	}
	// A rollback runs now: the release's own wait (schedule.at, after) is
	// long past and must not hold it.
	d.Schedule, d.After = nil, nil
	adm, err := s.admit.Admit(r.Context(), admit.Request{Descriptor: &d, Identity: p, RequestID: requestID(r), RollbackOf: cur.DeploymentID, RollbackFrom: from.ID})
	if err != nil {
		err = reusedRefused(err, from)
		if manent.ErrorCode(err) != manent.EForbidden {
			s.audit(r.Context(), r, p, "deployment.rollback", target, "refused", refusal(err))
		}
		writeError(w, r, s.log, err)
		return
	}
	result := func(rec *store.Record) api.RollbackResult {
		return api.RollbackResult{ID: rec.ID, State: rec.State, Version: rec.Version,
			RollbackOf: cur.DeploymentID, From: from.ID, Notice: adm.Input.Notice}
	}
	var also []func(*sql.Tx, *store.Record) error
	if key != "" {
		also = append(also, func(tx *sql.Tx, rec *store.Record) error {
			return s.recordIdempotency(r.Context(), tx, p, key, keyed, http.StatusAccepted, result(rec))
		})
	}
	also = append(also, s.auditIn(r.Context(), r, p, "deployment.rollback", target, func(rec *store.Record) string {
		return fmt.Sprintf("%s %s rollback_of %s from %s", rec.ID, rec.Version, cur.DeploymentID, from.ID)
	}))
	// The check above again, in the transaction that queues the rollback
	// and after the lock every submission takes: of two rollbacks (or a
	// deploy and a rollback) submitted at the same instant, the later sees
	// the first. A rollback of the same release that waits for its
	// approval is the same rollback asked again (a double click): it is
	// not queued a second time.
	also = append(also, func(tx *sql.Tx, rec *store.Record) error {
		a, err := s.st.InFlightTx(r.Context(), tx, app, env, rec.ID)
		if err != nil {
			return err
		}
		if a != nil {
			return deployAhead(target, *a)
		}
		if a, err = s.st.WaitingRollbackTx(r.Context(), tx, app, env, cur.DeploymentID, rec.ID); err != nil || a == nil {
			return err
		}
		return rollbackWaiting(target, cur.DeploymentID, *a)
	})
	rec, err := s.eng.Submit(r.Context(), adm.Input, adm.Decision, also...)
	if errors.Is(err, store.ErrIdempotencyTaken) && s.replay(w, r, p, key, keyed) {
		return // a concurrent request with the same key won
	}
	if manent.ErrorCode(err) == manent.EConflict {
		refuse(err)
		return
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	s.log.Info("rollback accepted", "deploy", rec.ID, "application", app, "environment", env,
		"version", rec.Version, "rollback_of", cur.DeploymentID, "from", from.ID, "requester", rec.Requester)
	w.Header().Set("Location", "/api/v1/deployments/"+rec.ID)
	writeJSON(w, http.StatusAccepted, result(rec))
}
