// Package plan holds what an admitted deploy will run: the ordered step
// list built from the pipeline's built-in steps and the descriptor's custom
// steps (SPEC §3 check 6), the rollout waves, what the deploy waits for,
// and Input, the effective deploy saved as the durable workflow's input.
//
// It imports pkg/manent, pkg/envconfig (the configuration revision) and
// descriptor only.
package plan

import (
	"fmt"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/manent"
)

// DefaultMaxRetries is the per-step retry count when neither the step nor
// the descriptor sets one.
const DefaultMaxRetries = 2

// Build returns the plan of d: the pipeline's steps (manent.DefaultPipeline
// when pipeline is empty) with each custom step placed before or after the
// step it names. Custom steps naming the same anchor keep descriptor order.
func Build(d *descriptor.Descriptor, pipeline []string) (manent.Plan, error) {
	if len(pipeline) == 0 {
		pipeline = manent.DefaultPipeline
	}
	retries := DefaultMaxRetries
	if d.MaxRetries != nil {
		retries = *d.MaxRetries
	}
	steps := make([]manent.PlanStep, 0, len(pipeline)+len(d.Steps))
	for _, n := range pipeline {
		steps = append(steps, manent.PlanStep{Name: n, MaxRetries: retries})
	}
	pending := append([]descriptor.CustomStep(nil), d.Steps...)
	// Custom steps may anchor on other custom steps: place until no progress.
	for len(pending) > 0 {
		var rest []descriptor.CustomStep
		for _, cs := range pending {
			anchor, before := cs.After, false
			if cs.Before != "" {
				anchor, before = cs.Before, true
			}
			idx := -1
			for i, s := range steps {
				if s.Name == anchor {
					idx = i
				}
			}
			if idx < 0 {
				rest = append(rest, cs)
				continue
			}
			r := retries
			if cs.MaxRetries != nil {
				r = *cs.MaxRetries
			}
			ps := manent.PlanStep{Name: cs.Name, Plugin: cs.Plugin, With: cs.With, MaxRetries: r}
			pos := idx + 1
			if before {
				pos = idx
				// keep descriptor order among steps placed before the same anchor
			} else {
				for pos < len(steps) && steps[pos].Plugin != "" && isPlacedAfter(d, steps[pos].Name, anchor) {
					pos++
				}
			}
			steps = append(steps[:pos], append([]manent.PlanStep{ps}, steps[pos:]...)...)
		}
		if len(rest) == len(pending) {
			return manent.Plan{}, fmt.Errorf("custom step %q names unknown step %q", rest[0].Name, rest[0].Before+rest[0].After)
		}
		pending = rest
	}
	return manent.Plan{Steps: steps}, nil
}

func isPlacedAfter(d *descriptor.Descriptor, name, anchor string) bool {
	for _, cs := range d.Steps {
		if cs.Name == name {
			return cs.After == anchor
		}
	}
	return false
}
