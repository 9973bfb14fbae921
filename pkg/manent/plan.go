package manent

import "time"

// Built-in step names (SPEC §5). They are a contract: the plan, the step
// table, callbacks and `rollback.on` use them.
const (
	StepConfig        = "config"
	StepChangeOpen    = "change:open"
	StepNotifyStarted = "notify:started"
	StepSecrets       = "secrets"
	StepArtifacts     = "artifacts"
	StepQA            = "qa"
	StepDeploy        = "deploy"
	StepPostTest      = "post-test"
	StepActivation    = "activation"
	StepCleanup       = "cleanup"
	StepChangeClose   = "change:close"
)

// DefaultPipeline is the order of the built-in plan steps, before custom steps
// are placed (SPEC §5 item 4).
var DefaultPipeline = []string{StepSecrets, StepArtifacts, StepQA, StepDeploy, StepPostTest, StepActivation}

// PlanStep is one entry of a deploy's plan.
type PlanStep struct {
	Name string `json:"name"`
	// Plugin runs a custom step; empty for built-in steps.
	Plugin     string         `json:"plugin,omitempty"`
	With       map[string]any `json:"with,omitempty"`
	MaxRetries int            `json:"max_retries"`
	// Timeout is never set: the engine bounds no step itself, each plugin
	// applies its own bound (script: with.timeout). Kept for the JSON
	// contract; setting it would change plan.Digest, which approvals bind.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Plan is the ordered step list of a deploy, saved as the workflow input.
type Plan struct {
	Steps []PlanStep `json:"steps"`
}

// Names returns the step names in order.
func (p Plan) Names() []string {
	out := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		out[i] = s.Name
	}
	return out
}
