package plan

import (
	"fmt"
	"time"

	"github.com/manent-io/manent/descriptor"
)

// Wave is one wave of a progressive rollout.
type Wave struct {
	Name    string        `json:"name"`
	Targets []string      `json:"targets,omitempty"`
	Percent int           `json:"percent,omitempty"`
	Observe time.Duration `json:"observe,omitempty"`
	// Approval: the wave starts only once approved (manent approve).
	Approval bool `json:"approval,omitempty"`
}

// WavesOf turns a descriptor's rollout into waves: named waves as written,
// percentages as waves named "10%", "50%", "100%".
func WavesOf(r *descriptor.Rollout) []Wave {
	if r == nil {
		return nil
	}
	var out []Wave
	for _, w := range r.Waves {
		out = append(out, Wave{Name: w.Name, Targets: w.Targets, Observe: w.Observe.D(), Approval: w.Approval})
	}
	for _, p := range r.Percentages {
		out = append(out, Wave{Name: fmt.Sprintf("%d%%", p), Percent: p})
	}
	return out
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
