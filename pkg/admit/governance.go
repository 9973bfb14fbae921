package admit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/governance"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/store"
)

// decide is check 5, governance: freezes, promotion, approvals, change
// management, and the waits of the descriptor itself (schedule.at, after).
// It returns the decision to save, what the deploy waits for, the
// problems that refuse it, and the successes of its version the policy was
// given (plan.Input.Successes). A storage fault (the database busy or
// unreachable) is its error: the deploy is not refused for it, the
// submitter is told to come back (503).
func (a *Admitter) decide(ctx context.Context, req Request, regions []string, config map[string]any, target descriptor.Target) (_ *manent.Decision, _ plan.Waits, _ []manent.FieldError, successes []string, _ error) {
	d := req.Descriptor
	var waits plan.Waits
	var problems []manent.FieldError
	now := time.Now().UTC()
	if d.Schedule != nil && d.Schedule.At != nil {
		switch at := d.Schedule.At.UTC(); {
		case at.After(now.AddDate(1, 0, 0)):
			problems = append(problems, manent.FieldError{Path: "/schedule/at", Message: fmt.Sprintf(
				"%s is more than a year ahead (the server's clock says %s): a deploy waits at most a year; give a time within %s",
				at.Format(time.RFC3339), now.Format(time.RFC3339), now.AddDate(1, 0, 0).Format(time.RFC3339))})
		case at.After(now):
			waits.At = &at
		case at.Before(now.Add(-scheduleClockSkew)):
			problems = append(problems, manent.FieldError{Path: "/schedule/at", Message: fmt.Sprintf(
				"%s is already past (the server's clock says %s): remove schedule.at to deploy now, or give a time to come",
				at.Format(time.RFC3339), now.Format(time.RFC3339))})
		}
	}
	for i, dep := range d.After {
		rec, err := a.cfg.Store.Deployment(ctx, dep)
		switch {
		case errors.Is(err, store.ErrNotFound),
			// A deploy the submitter may not read is answered as one that
			// does not exist: waiting on it would tell its outcome
			// ("dependency … ended REJECTED"), and a different answer its
			// existence.
			err == nil && a.cfg.Authorizer != nil &&
				a.cfg.Authorizer.Authorize(req.Identity, string(auth.DeploymentRead), rec.Application, rec.Environment) != nil:
			problems = append(problems, manent.FieldError{Path: fmt.Sprintf("/after/%d", i), Message: fmt.Sprintf("deploy %s does not exist", dep)})
		case store.AsFault(err) != nil:
			return nil, waits, nil, nil, fmt.Errorf("read deploy %s of after: %w", dep, err)
		case err != nil:
			problems = append(problems, manent.FieldError{Path: fmt.Sprintf("/after/%d", i), Message: err.Error()})
		}
	}
	waits.After = d.After

	in := governance.Input{
		Descriptor:  shownDescriptor(d),
		Identity:    req.Identity,
		Environment: governance.Environment{Name: d.Environment, Regions: regions, Config: plugin.RedactSettings(config)},
		Target:      shownTarget(target),
		Now:         now,
	}
	dec, err := a.governanceDecision(ctx, in, &successes)
	if err == nil && waits.At != nil {
		// The deploy starts at schedule.at at the earliest: a freeze then
		// refuses it, one now does not.
		in.Now = *waits.At
		var then governance.Decision
		if then, err = a.governanceDecision(ctx, in, &successes); err == nil {
			dec = freezeOf(dec, then, d.Environment)
		}
	}
	if f := store.AsFault(err); f != nil {
		return nil, waits, nil, nil, fmt.Errorf("governance: %w", err)
	}
	if err != nil {
		a.log.Error("governance decision failed", "error", err)
		return nil, waits, append(problems, manent.FieldError{Path: "/", Message: "the governance policy could not decide: " + err.Error()}), nil, nil
	}
	out := dec.ToDecision()
	// A cron tick's refusal is recorded on its schedule, whose next tick
	// comes by itself; a rollback has no deploy.yml: neither is told to
	// submit again or to add a schedule.at.
	refusals := denials(dec, d.Environment, !req.Tick && req.RollbackOf == "")
	for i, p := range refusals {
		if waits.At != nil && p.Path == "/environment" {
			// A deploy scheduled already is told to schedule it later,
			// not to add a schedule.at.
			msg := strings.TrimPrefix(p.Message, "environment ")
			if f := blockingFreeze(dec); f != nil {
				msg = strings.TrimSuffix(msg, whenItReopens(f))
			}
			refusals[i] = manent.FieldError{Path: "/schedule/at", Message: fmt.Sprintf("at %s, when the deploy is scheduled to start, %s: schedule it from then on",
				waits.At.Format(time.RFC3339), msg)}
		}
	}
	problems = append(problems, refusals...)
	if dec.ChangeRequired {
		if a.cfg.ChangeManagement {
			waits.Change = true
		} else {
			problems = append(problems, manent.FieldError{Path: "/environment",
				Message: "a change ticket is required for " + d.Environment + " but " + a.here() + " has no ITSM provider (itsm.url)"})
		}
	}
	if dec.BreakGlass && dec.Freeze != nil && len(problems) == 0 && !req.DryRun {
		err := a.cfg.Store.AppendAudit(context.WithoutCancel(ctx), store.AuditEntry{
			Identity: req.Identity.Subject, Action: "governance.break-glass", Target: d.Application + "/" + d.Environment,
			RequestID: req.RequestID, Outcome: "allowed",
			Detail: fmt.Sprintf("%s bypassed freeze %q (reopens %s)", req.Identity.Subject, dec.Freeze.Name, dec.Freeze.ReopensAt.UTC().Format(time.RFC3339)),
		})
		if err != nil {
			a.log.Error("audit write failed", "action", "governance.break-glass", "error", err)
		}
		a.log.Warn("BREAK GLASS: a deploy bypasses a freeze", "identity", req.Identity.Subject, "freeze", dec.Freeze.Name,
			"application", d.Application, "environment", d.Environment)
	}
	if dec.Approvals != nil && dec.Approvals.Count > 0 {
		waits.Approvals = &plan.ApprovalRule{Count: dec.Approvals.Count, Approvers: dec.Approvals.Approvers, Expires: dec.Approvals.Expires.D()}
		out.ApprovalsExpire = dec.Approvals.Expires.D().String()
	}
	return out, waits, problems, successes, nil
}

// scheduleClockSkew is how far in the past schedule.at may be and still
// mean "now": the submitter's clock and the server's differ a little, and
// a pipeline takes a moment between writing the time and submitting.
const scheduleClockSkew = 5 * time.Minute

// freezeOf is now's decision with the freezes of then's (the decision at
// the deploy's schedule.at): its freeze, break glass and freeze reasons
// replace now's. Every other rule is now's.
func freezeOf(now, then governance.Decision, environment string) governance.Decision {
	out := now
	out.Deny = nil
	for _, r := range now.Deny {
		if !freezeReason(r, environment) {
			out.Deny = append(out.Deny, r)
		}
	}
	for _, r := range then.Deny {
		if freezeReason(r, environment) {
			out.Deny = append(out.Deny, r)
		}
	}
	out.Freeze, out.BreakGlass = then.Freeze, then.BreakGlass
	out.Allowed = len(out.Deny) == 0 && blockingFreeze(out) == nil
	return out
}

// freezeReason says whether a deny reason is a freeze's, as governance.yaml
// words it (`prod (regions eu-1) is frozen by "weekend" until …`).
func freezeReason(reason, environment string) bool {
	return strings.HasPrefix(reason, environment) && strings.Contains(reason, " is frozen by \"")
}

// governanceDecision asks the decider, with what the store knows of earlier
// deploys (promotion, the current release); the ids of the successes it
// was given are added to *seen when seen is not nil.
func (a *Admitter) governanceDecision(ctx context.Context, in governance.Input, seen *[]string) (governance.Decision, error) {
	decider := a.cfg.Governance
	if decider == nil {
		decider = governance.AllowAll{}
	}
	d := in.Descriptor
	succ, err := a.cfg.Store.Successes(ctx, d.Application, d.Version)
	if err != nil {
		return governance.Decision{}, storeError(err)
	}
	for _, r := range succ {
		// A release rolled back there since it succeeded does not count
		// (a redeploy of the version, or a rollback to it, is a later
		// success that does).
		if r.FinishedAt != nil {
			rb, err := a.cfg.Store.RolledBackSince(ctx, r.Application, r.Environment, r.Version, *r.FinishedAt)
			if err != nil {
				return governance.Decision{}, storeError(err)
			}
			if rb != nil {
				in.Inventory.RolledBack = append(in.Inventory.RolledBack, governance.RolledBack{Application: r.Application,
					Environment: r.Environment, Version: r.Version, DeploymentID: rb.RollbackOf, RollbackID: rb.ID,
					RolledBackAt: rb.FinishedAt, By: rb.Requester})
				continue
			}
		}
		if seen != nil && !slices.Contains(*seen, r.ID) {
			*seen = append(*seen, r.ID)
		}
		in.Inventory.Successes = append(in.Inventory.Successes, governance.Success{Application: r.Application,
			Environment: r.Environment, Version: r.Version, DeploymentID: r.ID, FinishedAt: r.FinishedAt, SHA256: r.ArtifactSHA256})
	}
	in.Upstream = func(ctx context.Context, env string) (governance.Upstream, bool) {
		// Words only: a read that fails leaves the refusal as it was, and
		// so does an environment the submitter may not read (its deploys'
		// ids and its release are not theirs to learn).
		var u governance.Upstream
		if a.cfg.Authorizer != nil && a.cfg.Authorizer.Authorize(in.Identity, string(auth.DeploymentRead), d.Application, env) != nil {
			return u, false
		}
		latest, err := a.cfg.Store.LatestOfVersion(ctx, d.Application, env, d.Version)
		if err != nil {
			return u, false
		}
		if latest != nil {
			u.LatestID, u.LatestState = latest.ID, latest.State
		}
		cur, err := a.cfg.Store.Current(ctx, d.Application, env)
		if err != nil {
			return u, false
		}
		if cur != nil {
			u.Runs = cur.Version
		}
		return u, true
	}
	cur, err := a.cfg.Store.Current(ctx, d.Application, d.Environment)
	switch {
	case err == nil:
		in.Inventory.Current = cur
	case store.AsFault(err) != nil:
		// Deciding without the live version would let a promotion
		// rule pass that it must not.
		return governance.Decision{}, storeError(err)
	}
	return decider.Decide(ctx, in)
}

// storeError is err of a read of the store: a storage fault as its
// *store.Fault, which a caller tells (errors.As) from a plugin's or a
// provider's network error that store.AsFault would classify alike — the
// config step waits for the database, not for them (engine).
func storeError(err error) error {
	if f := store.AsFault(err); f != nil {
		return f
	}
	return err
}

// denials are the problems a decision refuses the deploy with: the policy's
// deny reasons and a blocking freeze — with, when advise, what to do about
// the freeze (whenItReopens).
func denials(dec governance.Decision, environment string, advise bool) []manent.FieldError {
	if dec.Allowed && len(dec.Deny) == 0 {
		return nil
	}
	var problems []manent.FieldError
	f := blockingFreeze(dec)
	advice := ""
	if f != nil && advise {
		advice = whenItReopens(f)
	}
	named := false
	for _, reason := range dec.Deny {
		// A freeze's own reason is said once, at /environment.
		if f != nil && freezeReason(reason, environment) {
			problems = append(problems, manent.FieldError{Path: "/environment", Message: "environment " + reason + advice})
			named = true
			continue
		}
		problems = append(problems, manent.FieldError{Path: "/", Message: "policy: " + reason})
	}
	if f != nil && !named {
		problems = append(problems, manent.FieldError{Path: "/environment", Message: fmt.Sprintf("environment %s is frozen by %q until %s%s",
			environment, f.Name, f.ReopensAt.UTC().Format(time.RFC3339), advice)})
	}
	if len(problems) == 0 {
		problems = append(problems, manent.FieldError{Path: "/", Message: "refused by the governance policy"})
	}
	return problems
}

// whenItReopens is what a freeze's refusal says to do: submit again once
// it reopens, or schedule the deploy for then (schedule.at is judged at its
// time). Nothing when the reopening is not known.
func whenItReopens(f *governance.FreezeInfo) string {
	if f.ReopensAt.IsZero() {
		return ""
	}
	return fmt.Sprintf(`: submit it again then, or add schedule: {at: %q} to deploy.yml to have it start then`, f.ReopensAt.UTC().Format(time.RFC3339))
}

func blockingFreeze(dec governance.Decision) *governance.FreezeInfo {
	if dec.Freeze == nil || dec.BreakGlass {
		return nil
	}
	return dec.Freeze
}

// recheckGovernance re-applies the whole decision when the deploy starts
// (SPEC §11.2): a freeze, a promotion no longer met or a policy that now
// denies refuses it, permanently. Approvals and change tickets were settled
// before the deploy was enqueued and are not asked again — but one this
// worker's governance requires and the deploy did not wait for (it was
// submitted through a worker configured otherwise, or before the
// configuration changed) refuses it too (unmetWaits).
func (a *Admitter) recheckGovernance(ctx context.Context, in plan.Input) error {
	dec, err := a.governanceDecision(ctx, runInput(in, in.Descriptor, plan.FreezeRegions(in.Waves)), nil)
	if err != nil {
		return fmt.Errorf("governance: %w", err)
	}
	if f := blockingFreeze(dec); f != nil {
		return plugin.Permanent(fmt.Errorf("environment %s is frozen by %q until %s: the deploy may not start",
			in.Environment, f.Name, f.ReopensAt.UTC().Format(time.RFC3339)))
	}
	if problems := denials(dec, in.Environment, false); len(problems) > 0 {
		msgs := make([]string, len(problems))
		for i, p := range problems {
			msgs[i] = p.Message
		}
		return plugin.Permanent(fmt.Errorf("governance refuses the deploy now: %s", strings.Join(msgs, "; ")))
	}
	return a.unmetWaits(dec, in)
}

// unmetWaits refuses a deploy, permanently, when the decision taken now
// wants approvals or a change ticket that the deploy did not go through
// when it was admitted (in.Waits): several workers configured otherwise
// share the database, or the configuration changed since. Approvals count
// when the admitted rule asked at least as many, by approvers the rule of
// now accepts (each of its patterns is one of today's, or today's is "*").
func (a *Admitter) unmetWaits(dec governance.Decision, in plan.Input) error {
	var missing []string
	if need := dec.Approvals; need != nil && need.Count > 0 && !approvalsCover(in.Waits.Approvals, need) {
		by := "*"
		if len(need.Approvers) > 0 {
			by = strings.Join(need.Approvers, ", ")
		}
		missing = append(missing, fmt.Sprintf("%s by %s for %s", manent.Plural(need.Count, "approval"), by, in.Environment))
	}
	if dec.ChangeRequired && !in.Waits.Change {
		missing = append(missing, "an approved change ticket for "+in.Environment)
	}
	if len(missing) == 0 {
		return nil
	}
	whose, through, why := "this server's", "", " — the governance configuration changed since; submit it again"
	if a.cfg.Shared && a.cfg.Worker != "" {
		whose = "worker " + a.cfg.Worker + "'s"
		switch in.Worker {
		case "":
		case a.cfg.Worker:
			through = " through " + in.Worker
			why = " — its configuration changed since; submit it again"
		default:
			through = " through " + in.Worker
			why = " — the workers' configurations differ (admin workers)"
		}
	}
	return plugin.Permanent(fmt.Errorf("%s governance requires %s, which this deploy did not get when it was submitted%s%s",
		whose, strings.Join(missing, " and "), through, why))
}

// Promoted checks promotion again once the deploy's artifact is
// downloaded and its digest known, when the descriptor did not state it:
// the policy decides with that digest, so the same version rebuilt (another
// artifact than the one that succeeded where promotion requires) is
// refused, permanently, before anything is deployed.
func (a *Admitter) Promoted(ctx context.Context, in plan.Input, sha256 string) error {
	if a.cfg.Governance == nil || in.Descriptor == nil || in.Descriptor.Artifact.SHA256 != "" || sha256 == "" {
		return nil
	}
	d := *in.Descriptor
	d.Artifact.SHA256 = sha256
	dec, err := a.governanceDecision(ctx, runInput(in, &d, plan.FreezeRegions(in.Waves)), nil)
	if err != nil {
		return fmt.Errorf("governance: %w", err)
	}
	if len(dec.MissingPromotions) == 0 {
		return nil
	}
	return plugin.Permanent(fmt.Errorf("governance refuses the downloaded artifact (sha256 %s): %s", sha256, strings.Join(dec.Deny, "; ")))
}

// approvalsCover says whether approvals collected under rule got satisfy
// need: as many or more, by approvers need accepts.
func approvalsCover(got *plan.ApprovalRule, need *governance.Approvals) bool {
	if got == nil || got.Count < need.Count {
		return false
	}
	if slices.Contains(need.Approvers, "*") {
		return true
	}
	if len(got.Approvers) == 0 {
		return false
	}
	for _, p := range got.Approvers {
		if !slices.Contains(need.Approvers, p) {
			return false
		}
	}
	return true
}

// Freeze returns the freeze that holds regions of the deploy now, or nil: a
// rollout wave waits while one covers its targets. A freeze the submitter
// may break does not hold.
func (a *Admitter) Freeze(ctx context.Context, in plan.Input, regions []string) (*governance.FreezeInfo, error) {
	if a.cfg.Governance == nil || in.Descriptor == nil {
		return nil, nil
	}
	dec, err := a.cfg.Governance.Decide(ctx, runInput(in, in.Descriptor, regions))
	if err != nil {
		return nil, fmt.Errorf("governance: %w", err)
	}
	return blockingFreeze(dec), nil
}

// LapsedApprover says why the approval subject gave a deploy of
// application/environment, under the rule's approvers, no longer counts,
// or "" while it does. A static token's is checked with the token's groups
// of now: it lapses once the token is removed from auth.tokens (revoked),
// no longer matches approvers, or RBAC no longer lets it approve there. An
// OIDC identity's groups are those of the token it approved with, which
// the server does not keep: its approval is not checked again (reject or
// cancel the deploy instead).
func (a *Admitter) LapsedApprover(subject string, approvers []string, application, environment string) string {
	name, ok := strings.CutPrefix(subject, "token:")
	if !ok || a.cfg.Tokens == nil {
		return ""
	}
	groups, ok := a.cfg.Tokens.TokenGroups(name)
	if !ok {
		return subject + " is no longer a token of this server (auth.tokens)"
	}
	who := manent.Identity{Subject: subject, Groups: groups}
	if len(approvers) > 0 && !who.Matches(approvers) {
		return fmt.Sprintf("%s is no longer one of the approvers %s", subject, strings.Join(approvers, ", "))
	}
	if a.cfg.Authorizer != nil && a.cfg.Authorizer.Authorize(who, string(auth.DeploymentApprove), application, environment) != nil {
		return fmt.Sprintf("RBAC no longer lets %s approve deploys of %s/%s", subject, application, environment)
	}
	return ""
}

// Governed reports whether a governance policy is configured.
func (a *Admitter) Governed() bool { return a.cfg.Governance != nil }

// runInput is the governance input for deploy in once admitted, decided
// again now: descriptor d (its own, or one with the downloaded artifact's
// digest), the requester, the regions concerned, the environment
// configuration of in (the config step's once it ran). The descriptor and
// the configuration, like the target, are redacted as readers see them
// (plugin.RedactSettings): a policy's reasons reach the 422 answer, the
// step's error and the audit log.
func runInput(in plan.Input, d *descriptor.Descriptor, regions []string) governance.Input {
	return governance.Input{
		Descriptor:  shownDescriptor(d),
		Identity:    in.Requesting(),
		Environment: governance.Environment{Name: in.Environment, Regions: regions, Config: plugin.RedactSettings(in.EnvConfig)},
		Target:      shownTarget(in.Target),
		Now:         time.Now().UTC(),
	}
}

// shownDescriptor is a copy of d as a policy sees it (input.descriptor):
// the credentials the submitter wrote in its parameters, its target's and
// its steps' `with`, and the URLs of its artifact, health checks and
// callbacks redacted as readers see them (plugin.RedactSettings,
// plugin.RedactURL); every other value as submitted. d is not changed:
// the deploy runs with what was submitted.
func shownDescriptor(d *descriptor.Descriptor) *descriptor.Descriptor {
	if d == nil {
		return nil
	}
	c := *d
	c.Artifact.URL = plugin.RedactURL(d.Artifact.URL)
	c.Parameters = plugin.RedactSettings(d.Parameters)
	if d.Target != nil {
		t := *d.Target
		t.With = plugin.RedactSettings(d.Target.With)
		c.Target = &t
	}
	c.Steps = slices.Clone(d.Steps)
	for i := range c.Steps {
		c.Steps[i].With = plugin.RedactSettings(d.Steps[i].With)
	}
	c.Health = slices.Clone(d.Health)
	for i := range c.Health {
		c.Health[i].URL = plugin.RedactURL(d.Health[i].URL)
	}
	c.Callbacks = slices.Clone(d.Callbacks)
	for i := range c.Callbacks {
		c.Callbacks[i].URL = plugin.RedactURL(d.Callbacks[i].URL)
	}
	return &c
}

// shownTarget is the target a deploy runs as a policy sees it
// (input.target): {plugin, with}, its credentials redacted as readers see
// them (plugin.RedactSettings); nil when no target is known.
func shownTarget(t descriptor.Target) map[string]any {
	if t.Plugin == "" {
		return nil
	}
	m := map[string]any{"plugin": t.Plugin}
	if t.With != nil {
		raw, err := json.Marshal(t.With)
		var with map[string]any
		if err == nil && json.Unmarshal(raw, &with) == nil {
			m["with"] = plugin.RedactSettings(with)
		}
	}
	return m
}
