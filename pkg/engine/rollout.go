package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/manent"
)

// Wave is one wave of a progressive rollout.
type Wave struct {
	Name    string        `json:"name"`
	Targets []string      `json:"targets,omitempty"`
	Percent int           `json:"percent,omitempty"`
	Observe time.Duration `json:"observe,omitempty"`
}

// Wave state names shown in status and `rollout` events.
const (
	WavePending    = "pending"
	WaveDeploying  = "deploying"
	WaveObserving  = "observing"
	WaveHealthy    = "healthy"
	WaveFailed     = "failed"
	WaveRolledBack = "rolled-back"
)

// HealthGate is the step that checks a wave after its observation time.
const HealthGate = "health-gate"

// WavesOf turns a descriptor's rollout into waves: named waves as written,
// percentages as waves named "10%", "50%", "100%".
func WavesOf(r *descriptor.Rollout) []Wave {
	if r == nil {
		return nil
	}
	var out []Wave
	for _, w := range r.Waves {
		out = append(out, Wave{Name: w.Name, Targets: w.Targets, Observe: w.Observe.D()})
	}
	for _, p := range r.Percentages {
		out = append(out, Wave{Name: fmt.Sprintf("%d%%", p), Percent: p})
	}
	return out
}

// waveStepName is a plan step's name within a wave: "deploy[canary]".
func waveStepName(step, wave string) string { return step + "[" + wave + "]" }

// baseStep strips the engine's prefixes and the wave from a step name:
// "rollback:deploy[canary]" → "deploy". A health gate counts as post-test.
func baseStep(name string) string {
	name = strings.TrimPrefix(strings.TrimPrefix(name, CheckpointPrefix), RollbackPrefix)
	if i := strings.IndexByte(name, '['); i > 0 && strings.HasSuffix(name, "]") {
		name = name[:i]
	}
	if name == HealthGate {
		return manent.StepPostTest
	}
	return name
}

// unit is one step of the execution sequence, with its wave if any.
type unit struct {
	step manent.PlanStep
	wave *Wave
	gate bool // the wave's health gate, after its observation time
}

// sequence lays out the plan: steps before `deploy` once, then for each
// wave the steps from `deploy` to `activation` and the wave's health gate,
// then the steps after `activation` once.
func sequence(p manent.Plan, waves []Wave) []unit {
	var out []unit
	if len(waves) == 0 {
		for _, ps := range p.Steps {
			out = append(out, unit{step: ps})
		}
		return out
	}
	first, last := -1, -1
	for i, ps := range p.Steps {
		if ps.Name == manent.StepDeploy && first < 0 {
			first = i
		}
		if ps.Name == manent.StepActivation {
			last = i
		}
	}
	if first < 0 || last < first {
		for _, ps := range p.Steps {
			out = append(out, unit{step: ps})
		}
		return out
	}
	for _, ps := range p.Steps[:first] {
		out = append(out, unit{step: ps})
	}
	for i := range waves {
		w := &waves[i]
		for _, ps := range p.Steps[first : last+1] {
			ps.Name = waveStepName(ps.Name, w.Name)
			out = append(out, unit{step: ps, wave: w})
		}
		out = append(out, unit{step: manent.PlanStep{Name: waveStepName(HealthGate, w.Name), MaxRetries: 0}, wave: w, gate: true})
	}
	for _, ps := range p.Steps[last+1:] {
		out = append(out, unit{step: ps})
	}
	return out
}

// PlanRowsWaves is PlanRows for a rollout: the step table a deploy starts with.
func PlanRowsWaves(p manent.Plan, waves []Wave) []string {
	names := []string{manent.StepConfig, manent.StepNotifyStarted}
	for _, u := range sequence(p, waves) {
		if compensable(baseStep(u.step.Name)) {
			names = append(names, CheckpointPrefix+u.step.Name)
		}
		names = append(names, u.step.Name)
	}
	return append(names, manent.StepCleanup)
}

// observe waits out a wave's observation time durably: a restarted worker
// sleeps only what is left.
func (r *run) observe(ctx dbos.Context, w *Wave) error {
	if w.Observe <= 0 {
		return nil
	}
	_, err := dbos.RunAsStep(ctx, func(sctx context.Context) (bool, error) {
		until := time.Now().Add(w.Observe).UTC()
		return true, r.e.st.AppendRollout(sctx, r.in.ID, manent.WaveStatus{Name: w.Name, Targets: w.Targets, Percent: w.Percent,
			State: WaveObserving, Message: "observing until " + until.Format(time.RFC3339)})
	}, dbos.WithStepName("observe["+w.Name+"]"), dbos.WithStepMaxRetries(5))
	if err != nil {
		return err
	}
	_, err = dbos.Sleep(ctx, w.Observe)
	return err
}

// waveEvent records a wave's state; called from inside steps.
func (r *run) waveEvent(ctx context.Context, w *Wave, state, msg string) {
	if w == nil {
		return
	}
	_ = r.e.st.AppendRollout(ctx, r.in.ID, manent.WaveStatus{Name: w.Name, Targets: w.Targets, Percent: w.Percent, State: state, Message: msg})
}

// RolloutStatus overlays the recorded wave states on the deploy's waves.
func RolloutStatus(input json.RawMessage, recorded []manent.WaveStatus) []manent.WaveStatus {
	var in Input
	if json.Unmarshal(input, &in) != nil || len(in.Waves) == 0 {
		return recorded
	}
	byName := map[string]manent.WaveStatus{}
	for _, w := range recorded {
		byName[w.Name] = w
	}
	out := make([]manent.WaveStatus, 0, len(in.Waves))
	for _, w := range in.Waves {
		st, ok := byName[w.Name]
		if !ok {
			st = manent.WaveStatus{Name: w.Name, Targets: w.Targets, Percent: w.Percent, State: WavePending}
		}
		out = append(out, st)
	}
	return out
}

// waitWaveFreeze holds a wave while a freeze covers its targets (regions):
// the wave waits, durably, until the freeze reopens, and its status says so.
func (r *run) waitWaveFreeze(ctx dbos.Context, w *Wave) error {
	if r.e.cfg.Governance == nil || len(w.Targets) == 0 {
		return nil
	}
	for i := 0; ; i++ {
		wait, err := dbos.RunAsStep(ctx, func(sctx context.Context) (time.Duration, error) {
			f, err := r.freeze(sctx, w.Targets)
			if err != nil || f == nil {
				return 0, err
			}
			r.waveEvent(sctx, w, WavePending, fmt.Sprintf("waiting: freeze %q until %s", f.Name, f.ReopensAt.UTC().Format(time.RFC3339)))
			return time.Until(f.ReopensAt), nil
		}, dbos.WithStepName(fmt.Sprintf("freeze[%s]-%d", w.Name, i)), dbos.WithStepMaxRetries(5))
		if err != nil {
			return err
		}
		if wait <= 0 {
			return nil
		}
		if _, err := dbos.Sleep(ctx, min(wait, time.Hour)); err != nil {
			return err
		}
	}
}

// RolloutRegion stands for "the whole rollout" when checking freezes before
// the waves: only a freeze on every region (or none) blocks the deploy then;
// a freeze on some regions holds only the waves that target them.
const RolloutRegion = "manent:rollout"

// FreezeRegions is what the deploy-wide freeze check passes as regions.
func FreezeRegions(waves []Wave) []string {
	for _, w := range waves {
		if len(w.Targets) > 0 {
			return []string{RolloutRegion}
		}
	}
	return nil
}
