package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plan"
)

// handleSubmit runs the checks of SPEC §3 in order, then either enqueues
// the deploy (202) or, with ?dry_run=true, answers the plan and the
// effective deploy without enqueueing.
func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request) {
	dryRun := r.URL.Query().Get("dry_run") == "true"
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	// 1. Descriptor.
	d, err := descriptor.Parse(body)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	// 2. Identity and permissions.
	p, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	perm := PermSubmit
	if dryRun {
		perm = PermDryRun
	}
	if err := s.cfg.Guard.Authorize(p, perm, d.Application, d.Environment); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if !dryRun && !s.limitSubmission(w, r, p) {
		return
	}
	target := d.Application + "/" + d.Environment
	if d.Schedule != nil && d.Schedule.Cron != "" && !dryRun {
		// A recurring deploy: checks 3, 4 and the plan now, the rest at each tick.
		if _, _, err := s.admitNoGovernance(r.Context(), d, p); err != nil {
			writeError(w, r, s.log, err)
			return
		}
		s.createSchedule(w, r, body, d, p)
		return
	}
	// 3–6. Sources, environment configuration, governance, plan.
	in, decision, err := s.admit(r.Context(), r, d, p)
	if err != nil {
		if !dryRun {
			s.audit(r.Context(), r, p, "deployment.submit", target, "refused", manent.ErrorMessage(err))
		}
		writeError(w, r, s.log, err)
		return
	}
	if dryRun {
		valid := true
		eff := map[string]any{}
		_ = json.Unmarshal(in.Effective, &eff)
		writeJSON(w, http.StatusOK, api.SubmitResult{Valid: &valid, Errors: []manent.FieldError{}, Plan: &in.Plan,
			Effective: eff, Notice: in.Notice, Decision: decision})
		return
	}
	rec, err := s.eng.Submit(r.Context(), in, decision)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	s.audit(r.Context(), r, p, "deployment.submit", target, "accepted", rec.ID+" "+rec.Version)
	s.log.Info("deploy accepted", "deploy", rec.ID, "application", rec.Application, "environment", rec.Environment,
		"version", rec.Version, "requester", rec.Requester)
	w.Header().Set("Location", "/api/v1/deployments/"+rec.ID)
	writeJSON(w, http.StatusAccepted, api.SubmitResult{ID: rec.ID, State: rec.State, Notice: in.Notice})
}

// admit runs checks 3 to 6 and returns the workflow input. Every problem of
// one check is reported at once.
func (s *Server) admit(ctx context.Context, r *http.Request, d *descriptor.Descriptor, p manent.Identity) (plan.Input, *manent.Decision, error) {
	return s.admitWith(ctx, r, d, p, true)
}

// admitNoGovernance runs checks 3, 4 and the plan (a recurring deploy is
// governed at each tick).
func (s *Server) admitNoGovernance(ctx context.Context, d *descriptor.Descriptor, p manent.Identity) (plan.Input, *manent.Decision, error) {
	return s.admitWith(ctx, nil, d, p, false)
}

func (s *Server) admitWith(ctx context.Context, r *http.Request, d *descriptor.Descriptor, p manent.Identity, governed bool) (plan.Input, *manent.Decision, error) {
	var problems []manent.FieldError
	// 3. Sources and callback URLs.
	problems = append(problems, fieldErrors(s.cfg.Sources.Allowed(d.Artifact.URL), "/artifact/url")...)
	if len(d.Callbacks) > 0 {
		urls := make([]string, len(d.Callbacks))
		for i, c := range d.Callbacks {
			urls[i] = c.URL
		}
		problems = append(problems, fieldErrors(s.cfg.Callbacks.CheckAll(ctx, urls), "/callbacks")...)
		if !s.cfg.CallbacksSigned {
			problems = append(problems, manent.FieldError{Path: "/callbacks",
				Message: "this server has no callback signing secret (callbacks.secret_env): callbacks would go unsigned"})
		}
	}
	if d.Notify != nil {
		for i, ch := range d.Notify.Chat {
			if !slices.Contains(s.cfg.ChatChannels, ch) {
				problems = append(problems, manent.FieldError{Path: fmt.Sprintf("/notify/chat/%d", i),
					Message: fmt.Sprintf("chat channel %q is not configured on this server (known: %v)", ch, s.cfg.ChatChannels)})
			}
		}
	}
	// 4. Environment configuration, merged under the descriptor policy.
	env := s.environment(ctx, d)
	problems = append(problems, env.problems...)
	// 6. Plan.
	pl, err := plan.Build(d, s.cfg.Pipeline)
	if err != nil {
		problems = append(problems, manent.FieldError{Path: "/steps", Message: err.Error()})
	}
	if len(problems) > 0 {
		return plan.Input{}, nil, &manent.Error{Code: manent.EInvalid,
			Message: fmt.Sprintf("the deploy was refused: %d problem(s)", len(problems)), Fields: problems}
	}
	// 5. Governance.
	decision, waits, refused := &manent.Decision{Allowed: true, Source: "at each tick"}, plan.Waits{}, []manent.FieldError(nil)
	if governed {
		decision, waits, refused = s.decide(ctx, r, d, p, plan.FreezeRegions(plan.WavesOf(d.Rollout)))
	}
	if len(refused) > 0 {
		return plan.Input{}, nil, &manent.Error{Code: manent.EInvalid,
			Message: fmt.Sprintf("the deploy was refused: %d problem(s)", len(refused)), Fields: refused}
	}
	in := plan.Input{
		ID: manent.NewDeploymentID(), Application: d.Application, Environment: d.Environment, Version: d.Version,
		Requester: p.Subject, Descriptor: d, Plan: pl, Target: env.target, Parameters: env.parameters, Rollback: env.rollback,
		Waves: plan.WavesOf(d.Rollout), EnvChecked: env.checked, EnvRevision: env.revision, Notice: env.notice,
		Effective: env.effective, Waits: waits, RequesterGroups: p.Groups,
	}
	return in, decision, nil
}

// fieldErrors turns a policy error into field errors (at path when it has
// none of its own).
func fieldErrors(err error, path string) []manent.FieldError {
	if err == nil {
		return nil
	}
	var me *manent.Error
	if errors.As(err, &me) && len(me.Fields) > 0 {
		return me.Fields
	}
	return []manent.FieldError{{Path: path, Message: manent.ErrorMessage(err)}}
}
