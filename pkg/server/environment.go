package server

import (
	"context"
	"encoding/json"
	"errors"
	"maps"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/envconfig"
	"github.com/manent-io/manent/pkg/manent"
)

// Environments gives a deploy its environment configuration
// (*envconfig.Defaults in a running server).
type Environments interface {
	Get(ctx context.Context, application, environment string) (*envconfig.Config, envconfig.Revision, error)
}

// envResult is check 4's outcome.
type envResult struct {
	target     descriptor.Target
	parameters map[string]any
	rollback   envconfig.RollbackPolicy
	effective  json.RawMessage
	revision   envconfig.Revision
	checked    bool
	notice     string
	problems   []manent.FieldError
}

// environment reads the environment configuration valid now and merges the
// descriptor into it (SPEC §3 check 4). When the provider does not answer,
// the deploy is accepted with the descriptor alone and the worker's config
// step checks it (the notice says so).
func (s *Server) environment(ctx context.Context, d *descriptor.Descriptor) envResult {
	var res envResult
	provider := s.cfg.Environments
	if provider == nil {
		provider = envconfig.None{}
	}
	cfg, rev, err := provider.Get(ctx, d.Application, d.Environment)
	res.revision = rev
	switch {
	case errors.Is(err, envconfig.ErrUnavailable):
		s.log.Warn("environment configuration unreachable at submission", "application", d.Application,
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
	}
	if cfg == nil {
		cfg = &envconfig.Config{}
	}
	s.trialDefaults(d, cfg)
	eff, err := envconfig.Merge(d, cfg)
	if err != nil {
		if !res.checked {
			// Without the environment's answer a missing target is not an
			// error yet: the config step decides.
			res.target = descriptor.Target{}
			if d.Target != nil {
				res.target = descriptor.Target{Plugin: d.Target.Plugin, With: maps.Clone(d.Target.With)}
			}
			res.parameters = d.Parameters
			res.rollback = envconfig.RollbackPolicy{Enabled: false, On: envconfig.DefaultRollbackOn()}
			res.effective, _ = json.Marshal(d)
			return res
		}
		res.problems = fieldErrors(err, "/environment")
		return res
	}
	res.target = eff.Target
	if res.target.Plugin == "local" && s.cfg.TrialMode {
		if res.target.With == nil {
			res.target.With = map[string]any{}
		}
		if _, ok := res.target.With["dir"]; !ok {
			res.target.With["dir"] = s.trialTarget(d.Application, d.Environment).With["dir"]
		}
		eff.Target = res.target
	}
	res.parameters = eff.Parameters
	res.rollback = envconfig.RollbackPolicy{Enabled: eff.Rollback.Enabled, On: eff.Rollback.On}
	res.effective, _ = json.Marshal(eff)
	return res
}

// trialDefaults gives local trial mode its environment (SPEC §8.1): the
// local target under <data-dir>/targets and rollback enabled, where the
// environment configuration says nothing.
func (s *Server) trialDefaults(d *descriptor.Descriptor, cfg *envconfig.Config) {
	if !s.cfg.TrialMode {
		return
	}
	if cfg.Target == nil && (d.Target == nil || d.Target.Plugin == "") {
		t := s.trialTarget(d.Application, d.Environment)
		cfg.Target = &t
	}
	if cfg.Rollback.Enabled == nil {
		on := true
		cfg.Rollback.Enabled = &on
	}
}
