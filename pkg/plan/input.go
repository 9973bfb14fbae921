package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/envconfig"
	"github.com/manent-io/manent/pkg/manent"
)

// Input is an admitted deploy: the effective deploy the submission checks
// computed (SPEC §3), saved as the durable workflow's input. pkg/admit
// builds it; pkg/engine runs it.
type Input struct {
	ID          string `json:"id"`
	Application string `json:"application"`
	Environment string `json:"environment"`
	Version     string `json:"version"`
	Requester   string `json:"requester"`
	// RequesterGroups are the submitter's groups (freeze allow lists).
	RequesterGroups []string               `json:"requester_groups,omitempty"`
	Descriptor      *descriptor.Descriptor `json:"descriptor"`
	Plan            manent.Plan            `json:"plan"`
	// Target is the effective target (descriptor merged with the environment).
	Target     descriptor.Target `json:"target"`
	Parameters map[string]any    `json:"parameters,omitempty"`
	// Rollback is the effective rollback policy.
	Rollback envconfig.RollbackPolicy `json:"rollback"`
	// Waves is the progressive rollout (none: one pass).
	Waves []Wave `json:"waves,omitempty"`
	// Waits is what the deploy waits for before it is enqueued.
	Waits Waits `json:"waits,omitzero"`
	// EnvChecked says whether the environment configuration was read and
	// merged at submission (EnvRevision); if not, the config step must.
	EnvChecked  bool               `json:"env_checked"`
	EnvRevision envconfig.Revision `json:"env_revision"`
	// Notice is what the submitter was told (e.g. the provider was down).
	Notice string `json:"notice,omitempty"`
	// Effective is the merged deploy as checked at submission.
	Effective json.RawMessage `json:"effective,omitempty"`
	// EnvConfig is the environment configuration read at submission (the
	// config step's replaces it once it ran): what governance sees as
	// input.environment.config at every later decision. It may hold
	// credentials: never shown.
	EnvConfig map[string]any `json:"env_config,omitempty"`
	// RollbackOf is the deploy a rollback goes back from (SPEC §11.5).
	RollbackOf string `json:"rollback_of,omitempty"`
	// RollbackFrom is the deploy whose release (version, descriptor,
	// artifact) a rollback deploys again; "" on a rollback a release
	// before this field admitted.
	RollbackFrom string `json:"rollback_from,omitempty"`
	// Worker is the worker (executor id) that admitted the deploy: the
	// config step, run by any worker, names it when their configurations
	// differ ("" before this field existed).
	Worker string `json:"worker,omitempty"`
	// Successes are the SUCCESS deploys of its application and version the
	// governance policy was given at submission (promotion): engine.Submit
	// refuses the deploy when retention.deploys removed one meanwhile, as
	// the policy judges again at its start without it.
	Successes []string `json:"successes,omitempty"`
}

// Requesting returns the identity that submitted the deploy.
func (in Input) Requesting() manent.Identity {
	return manent.Identity{Subject: in.Requester, Groups: in.RequesterGroups}
}

// PartitionKey is the deploy's partition of the deploy queue: at most one
// deploy runs at a time per application/environment.
func (in Input) PartitionKey() string { return PartitionKey(in.Application, in.Environment) }

// PartitionKey is the queue partition of application/environment.
func PartitionKey(application, environment string) string {
	return application + "/" + environment
}

// Waits is what a deploy waits for before it is enqueued.
type Waits struct {
	At        *time.Time    `json:"at,omitempty"`
	After     []string      `json:"after,omitempty"`
	Approvals *ApprovalRule `json:"approvals,omitempty"`
	// Change says an ITSM change must be opened and approved.
	Change bool `json:"change,omitempty"`
}

// ApprovalRule is how many approvals by whom (identity patterns matched by
// manent.Identity.Matches), within how long.
type ApprovalRule struct {
	Count     int           `json:"count"`
	Approvers []string      `json:"approvers,omitempty"`
	Expires   time.Duration `json:"expires,omitempty"`
}

// Empty reports whether nothing is waited for.
func (w Waits) Empty() bool {
	return w.At == nil && len(w.After) == 0 && w.Approvals == nil && !w.Change
}

// FirstState is the state a deploy starts in.
func (w Waits) FirstState() manent.State {
	switch {
	case w.At != nil:
		return manent.StateDelayed
	case len(w.After) > 0:
		return manent.StateWaitingDependency
	case w.Approvals != nil || w.Change:
		return manent.StateAwaitingApproval
	}
	return manent.StateEnqueued
}

// FirstReason is why a deploy in FirstState waits, when submission knows
// it: the time of schedule.at. The gate says it for the other waits once it
// looks at them.
func (w Waits) FirstReason() string {
	if w.At != nil {
		return "schedule.at " + w.At.UTC().Format(time.RFC3339)
	}
	return ""
}

// Digest binds approvals to what they approve: the plan, the target and
// the artifact (URL and expected digest).
func Digest(in Input) string {
	h := sha256.New()
	b, _ := json.Marshal(struct {
		Plan     manent.Plan `json:"plan"`
		Target   any         `json:"target"`
		Artifact any         `json:"artifact"`
		Version  string      `json:"version"`
	}{in.Plan, in.Target, in.Descriptor.Artifact, in.Version})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}
