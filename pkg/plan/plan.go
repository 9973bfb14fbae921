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
// when pipeline is empty) with each custom step placed just before or just
// after the step it names, a plan step or another custom step. The steps
// placed against one step come in descriptor order, each followed (or
// preceded) by the steps placed against it in turn:
//
//	deploy ← a (before), b (after), c (after b)  ⇒  a, deploy, b, c
//
// Build takes time linear in the number of steps. A custom step naming a
// step that is not in the plan, or a loop of custom steps placed against
// each other, is an error naming the first such step.
func Build(d *descriptor.Descriptor, pipeline []string) (manent.Plan, error) {
	if len(pipeline) == 0 {
		pipeline = manent.DefaultPipeline
	}
	retries := DefaultMaxRetries
	if d.MaxRetries != nil {
		retries = *d.MaxRetries
	}
	// The custom steps placed before and after each step, in descriptor order.
	before := make(map[string][]int)
	after := make(map[string][]int)
	for i, cs := range d.Steps {
		if cs.Before != "" {
			before[cs.Before] = append(before[cs.Before], i)
		} else {
			after[cs.After] = append(after[cs.After], i)
		}
	}
	steps := make([]manent.PlanStep, 0, len(pipeline)+len(d.Steps))
	placed := make([]bool, len(d.Steps))
	// place adds the steps placed before name, name's own step (through
	// add), then the steps placed after it; each custom step once.
	var place func(name string, add func())
	custom := func(i int) func() {
		return func() {
			cs := d.Steps[i]
			r := retries
			if cs.MaxRetries != nil {
				r = *cs.MaxRetries
			}
			steps = append(steps, manent.PlanStep{Name: cs.Name, Plugin: cs.Plugin, With: cs.With, MaxRetries: r})
		}
	}
	place = func(name string, add func()) {
		for _, i := range before[name] {
			if !placed[i] {
				placed[i] = true
				place(d.Steps[i].Name, custom(i))
			}
		}
		add()
		for _, i := range after[name] {
			if !placed[i] {
				placed[i] = true
				place(d.Steps[i].Name, custom(i))
			}
		}
	}
	for _, n := range pipeline {
		place(n, func() { steps = append(steps, manent.PlanStep{Name: n, MaxRetries: retries}) })
	}
	for i, ok := range placed {
		if ok {
			continue
		}
		cs := d.Steps[i]
		anchor := cs.Before + cs.After
		for _, o := range d.Steps {
			if o.Name == anchor {
				return manent.Plan{}, fmt.Errorf("custom step %q cannot be placed: it and %q are placed before/after each other in a loop", cs.Name, anchor)
			}
		}
		return manent.Plan{}, fmt.Errorf("custom step %q names unknown step %q", cs.Name, anchor)
	}
	return manent.Plan{Steps: steps}, nil
}
