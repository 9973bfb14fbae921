package governance

import (
	"context"
	"errors"
)

// Decider decides on deploys: *Rules, *Rego and AllowAll. The server keeps
// one, built by FromConfig, and calls it at submission (SPEC §3 check 5);
// the engine calls it again in the config step.
type Decider interface {
	Decide(ctx context.Context, in Input) (Decision, error)
}

// FromConfig builds the Decider of the server configuration's `governance`
// section: the YAML rules at rulesPath or the Rego policy at regoPath, at
// most one of them; with neither, AllowAll.
func FromConfig(rulesPath, regoPath string) (Decider, error) {
	switch {
	case rulesPath != "" && regoPath != "":
		return nil, errors.New("governance: set either rules or rego, not both")
	case rulesPath != "":
		r, err := LoadRules(rulesPath)
		if err != nil {
			return nil, err
		}
		return r, nil
	case regoPath != "":
		p, err := LoadRego(regoPath)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	return AllowAll{}, nil
}

// AllowAll is the Decider when no governance is configured: every deploy is
// allowed, with no approvals, change ticket or freeze.
type AllowAll struct{}

// Decide allows the deploy; Source is "none".
func (AllowAll) Decide(ctx context.Context, in Input) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	if in.Descriptor == nil {
		return Decision{}, errNoDescriptor
	}
	return Decision{Allowed: true, Source: "none"}, nil
}
