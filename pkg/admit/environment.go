package admit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/envconfig"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/plugin"
)

// envResult is check 4's outcome: the effective deploy.
type envResult struct {
	target     descriptor.Target
	parameters map[string]any
	rollback   envconfig.RollbackPolicy
	effective  json.RawMessage
	revision   envconfig.Revision
	// config is the environment configuration as read, the document a
	// Rego policy sees as input.environment.config (nil: none was read).
	config map[string]any
	// checked says the provider answered; when it did not, the deploy is
	// accepted with the descriptor alone and its config step checks it.
	checked  bool
	notice   string
	problems []manent.FieldError
}

// environment reads the environment configuration valid now and merges the
// descriptor into it (SPEC §3 check 4).
func (a *Admitter) environment(ctx context.Context, d *descriptor.Descriptor) envResult {
	var res envResult
	cfg, rev, err := a.provider().Get(ctx, d.Application, d.Environment)
	res.revision = rev
	switch {
	case errors.Is(err, envconfig.ErrUnavailable):
		a.log.Warn("environment configuration unreachable at submission", "application", d.Application,
			"environment", d.Environment, "source", rev.Source, "error", err)
		res.notice = "the environment configuration did not answer (" + manent.ErrorMessage(err) +
			"); the deploy is accepted and its config step will check it"
		cfg = &envconfig.Config{}
	case err != nil && manent.ErrorCode(err) == manent.EInvalid:
		res.problems = fieldErrors(err, "/environment")
		return res
	case err != nil:
		res.problems = []manent.FieldError{{Path: "/environment", Message: "environment configuration: " + err.Error()}}
		return res
	default:
		res.checked = true
		res.config = ConfigDocument(cfg)
	}
	eff, err := a.merge(d, cfg)
	if err != nil {
		if !res.checked {
			// Without the environment's answer a missing target is not an
			// error yet: the config step decides.
			if d.Target != nil {
				res.target = descriptor.Target{Plugin: d.Target.Plugin, With: maps.Clone(d.Target.With)}
			}
			res.parameters = d.Parameters
			res.rollback = envconfig.RollbackPolicy{Enabled: false, On: envconfig.DefaultRollbackOn()}
			res.effective = shownEffective(d)
			return res
		}
		res.problems = fieldErrors(err, "/environment")
		return res
	}
	res.target, res.parameters, res.rollback = eff.Target, eff.Parameters, eff.Rollback
	res.effective = shownEffective(eff)
	for _, w := range eff.Warnings {
		if res.notice != "" {
			res.notice += "; "
		}
		res.notice += w
	}
	return res
}

// shownEffective is the effective deploy as readers see it (a dry run,
// GET …/current, `manent diff`): credentials in the settings and parameters
// — an environment configuration's `Authorization` header, a signed
// artifact URL — are redacted (plugin.RedactSettings), and so are the
// query values of callback URLs. The deploy runs with
// the merged values themselves, which travel in its input, not here.
func shownEffective(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&m) != nil {
		return raw
	}
	secrets := m["secrets"] // names and references (env:…, file:…), not values
	m = plugin.RedactSettings(m)
	if secrets != nil {
		m["secrets"] = secrets
	}
	// A callback URL's query is often its credential under a name that
	// says nothing (`?code=`): every value is hidden, as the delivery
	// views hide the whole query.
	if cbs, ok := m["callbacks"].([]any); ok {
		for _, cb := range cbs {
			if c, ok := cb.(map[string]any); ok {
				if u, ok := c["url"].(string); ok {
					c["url"] = plugin.RedactQuery(u)
				}
			}
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// ConfigDocument is cfg as governance sees it (input.environment.config):
// the configuration document's keys (target, parameters, rollback,
// regions, descriptor_policy), nil for none.
func ConfigDocument(cfg *envconfig.Config) map[string]any {
	if cfg == nil {
		return nil
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

func (a *Admitter) provider() envconfig.Provider {
	if a.cfg.Environments == nil {
		return envconfig.None{}
	}
	return a.cfg.Environments
}

// merge is the one effective-deploy computation, shared by admission and
// the config step: the server's trial defaults (SPEC §8.1) where the
// environment configuration says nothing, then envconfig.Merge, then the
// trial local target's directory.
func (a *Admitter) merge(d *descriptor.Descriptor, cfg *envconfig.Config) (*envconfig.Effective, error) {
	if cfg == nil {
		cfg = &envconfig.Config{}
	}
	if a.cfg.Trial {
		c := *cfg
		if c.Target == nil && (d.Target == nil || d.Target.Plugin == "") {
			t := a.trialTarget(d.Application, d.Environment)
			c.Target = &t
		}
		if c.Rollback.Enabled == nil {
			on := true
			c.Rollback.Enabled = &on
		}
		cfg = &c
	}
	eff, err := envconfig.Merge(d, cfg)
	if err != nil {
		return nil, err
	}
	if a.cfg.Trial && eff.Target.Plugin == "local" {
		if eff.Target.With == nil {
			eff.Target.With = map[string]any{}
		}
		if _, ok := eff.Target.With["dir"]; !ok {
			eff.Target.With["dir"] = a.trialTarget(d.Application, d.Environment).With["dir"]
		}
	}
	return eff, nil
}

// trialTarget is the local target of SPEC §8.1.
func (a *Admitter) trialTarget(app, env string) descriptor.Target {
	return descriptor.Target{Plugin: "local", With: map[string]any{"dir": filepath.Join(a.cfg.TargetsDir, app, env)}}
}

// Reconfigured is what the config step runs with: the configuration valid
// when the deploy starts, and where it came from.
type Reconfigured struct {
	Source     string                   `json:"source"`
	Revision   string                   `json:"revision,omitempty"`
	Target     descriptor.Target        `json:"target"`
	Parameters map[string]any           `json:"parameters,omitempty"`
	Rollback   envconfig.RollbackPolicy `json:"rollback"`
	// EnvConfig is the environment configuration governance judged the
	// deploy with (input.environment.config): the one valid now, or the
	// one checked at submission when the provider does not answer.
	EnvConfig map[string]any `json:"env_config,omitempty"`
	// Notes are what the step log should say (the provider did not answer,
	// the configuration changed since submission).
	Notes []string `json:"-"`
}

// Reconfigure is the `config` step's check (SPEC §5 step 1, §11.2): it reads
// the environment configuration valid now, merges it with the same code as
// admission, checks the plugins again and re-applies the whole governance
// decision (freezes, promotion, policy). A refusal is permanent
// (plugin.Permanent); a provider that does not answer is retried, unless
// the configuration was checked at submission, which is then used; so is a
// plugin that could not decide on its settings (plugin.UndecidedError).
func (a *Admitter) Reconfigure(ctx context.Context, in plan.Input) (*Reconfigured, error) {
	out := &Reconfigured{Source: "submission", Revision: in.EnvRevision.Revision, Target: in.Target,
		Parameters: in.Parameters, Rollback: in.Rollback, EnvConfig: in.EnvConfig}
	if in.EnvRevision.Source != "" {
		out.Source = in.EnvRevision.Source
	}
	d := in.Descriptor
	if d == nil {
		return nil, plugin.Permanent(errors.New("the deploy has no descriptor"))
	}
	cfg, rev, err := a.provider().Get(ctx, in.Application, in.Environment)
	switch {
	case errors.Is(err, envconfig.ErrUnavailable) && in.EnvChecked:
		out.Notes = append(out.Notes, fmt.Sprintf("environment configuration unreachable (%v): using the one checked at submission (%s %s)",
			err, in.EnvRevision.Source, in.EnvRevision.Revision))
	case errors.Is(err, envconfig.ErrUnavailable):
		return nil, fmt.Errorf("environment configuration unreachable, and it was not checked at submission: %w", err)
	case err != nil:
		return nil, plugin.Permanent(fmt.Errorf("environment configuration: %w", err))
	default:
		eff, err := a.merge(d, cfg)
		if err != nil {
			return nil, plugin.Permanent(fmt.Errorf("%s%s", manent.ErrorMessage(err), fieldList(err)))
		}
		out.Source, out.Revision = rev.Source, rev.Revision
		out.Target, out.Parameters, out.Rollback = eff.Target, eff.Parameters, eff.Rollback
		out.EnvConfig = ConfigDocument(cfg)
		out.Notes = append(out.Notes, eff.Warnings...)
		if in.EnvChecked && rev.Revision != in.EnvRevision.Revision {
			out.Notes = append(out.Notes, fmt.Sprintf("environment configuration changed since submission: revision %s, was %s", rev.Revision, in.EnvRevision.Revision))
		}
	}
	problems, pending := a.checkPlugins(ctx, d, out.Target, out.EnvConfig, true)
	if problems := append(problems, a.checkSecrets(d)...); len(problems) > 0 {
		return nil, plugin.Permanent(fmt.Errorf("%s", describe(problems)))
	}
	if err := undecidedError("the plugins could not check their settings again", pending); err != nil {
		// No verdict on the settings (a plugin's validate did not answer):
		// retried as the step is, not a refusal for good.
		return nil, err
	}
	now := in
	now.EnvConfig = out.EnvConfig
	if err := a.recheckGovernance(ctx, now); err != nil {
		return nil, err
	}
	return out, nil
}

// fieldList renders the field errors of err for a step's error text.
func fieldList(err error) string {
	var me *manent.Error
	if !errors.As(err, &me) || len(me.Fields) == 0 {
		return ""
	}
	return "; " + describe(me.Fields)
}

func describe(fs []manent.FieldError) string {
	s := ""
	for i, f := range fs {
		if i > 0 {
			s += "; "
		}
		s += f.Path + ": " + f.Message
	}
	return s
}
