package governance

import (
	"context"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/manent"
)

// Input is everything a decision may depend on. Its JSON form is the
// document a Rego policy sees as `input`; the field names are stable.
type Input struct {
	// Descriptor is the submitted deploy.yml, as JSON (SPEC §2 names).
	// The server gives a copy with its credentials redacted as readers
	// see them (parameters, target and steps' with, URLs' passwords): a
	// policy's reasons are shown.
	Descriptor *descriptor.Descriptor `json:"descriptor"`
	// Identity is who submits the deploy.
	Identity manent.Identity `json:"identity"`
	// Environment is the target environment; Name defaults to the
	// descriptor's environment.
	Environment Environment `json:"environment"`
	// Target is the target the deploy runs: the environment's, with the
	// descriptor's allowed overrides (the effective deploy's), credentials
	// redacted as readers see them; {} when not known (the environment
	// did not answer and the descriptor names none). Descriptor.Target is
	// only what was submitted.
	Target map[string]any `json:"target"`
	// Now is the time of the decision, RFC 3339 in JSON. Policies must
	// use it, never the wall clock, so a decision can be replayed. Zero
	// means time.Now().
	Now time.Time `json:"now"`
	// Inventory is what the server knows about earlier deploys.
	Inventory Inventory `json:"inventory"`
	// Upstream, when set, tells what an environment promotion requires
	// has of the deploy's version, for the words of governance.yaml's
	// refusal ("its last deploy there (dpl_…) ended ERROR"). It is asked
	// only for the environments where the version has not succeeded, so
	// a deploy that is allowed costs no read. Not part of the Rego input.
	Upstream func(ctx context.Context, environment string) (Upstream, bool) `json:"-"`
}

// Upstream is what an environment promotion requires has of the deploy's
// application and version, when it has not succeeded there.
type Upstream struct {
	// LatestID and LatestState are the latest deploy of the version
	// there; "" when it was never deployed there.
	LatestID    string
	LatestState manent.State
	// Runs is the version of the environment's current release, "" when
	// it has none.
	Runs string
}

// Environment is the deploy's environment as the server resolved it.
type Environment struct {
	// Name is the environment, e.g. "prod".
	Name string `json:"name"`
	// Regions are the regions the deploy touches (the rollout's targets);
	// empty means the whole environment, so every region-scoped freeze of
	// the environment applies.
	Regions []string `json:"regions"`
	// Config is the environment configuration, for Rego policies; the
	// YAML rules do not read it. The server gives it redacted as readers
	// see it (plugin.RedactSettings): a policy's reasons are shown.
	Config map[string]any `json:"config"`
}

// Inventory holds the earlier deploys a decision needs.
type Inventory struct {
	// Successes are deploys that ended SUCCESS. Promotion rules look for
	// the same application and version in each required environment, so
	// the server needs to fill only those of this application and version
	// (Rules.PromotionRequires tells which environments the YAML rules
	// ask about).
	Successes []Success `json:"successes"`
	// RolledBack are the successes of this application and version that a
	// later rollback (`manent rollback`, ended SUCCESS) took back in their
	// environment: the server leaves them out of Successes, so they do not
	// count for promotion until the version succeeds there again, and
	// lists them here so that a refusal can say why.
	RolledBack []RolledBack `json:"rolled_back"`
	// Current is the environment's current release, nil when none.
	Current *manent.Release `json:"current"`
}

// Success is one deploy that ended SUCCESS.
type Success struct {
	Application  string     `json:"application"`
	Environment  string     `json:"environment"`
	Version      string     `json:"version"`
	DeploymentID string     `json:"deployment_id,omitempty"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
	// SHA256 is the digest of the artifact it deployed, when known.
	// Promotion asks for the same artifact, not only the same version,
	// when the deploy's digest is known too.
	SHA256 string `json:"sha256,omitempty"`
}

// RolledBack is a success whose release a later rollback took back.
type RolledBack struct {
	Application string `json:"application"`
	Environment string `json:"environment"`
	Version     string `json:"version"`
	// DeploymentID is the deploy whose release was rolled back.
	DeploymentID string `json:"deployment_id"`
	// RollbackID is the rollback deploy, RolledBackAt when it ended
	// SUCCESS, By who submitted it (an identity, token:ci).
	RollbackID   string     `json:"rollback_id"`
	RolledBackAt *time.Time `json:"rolled_back_at,omitempty"`
	By           string     `json:"by"`
}

// normalized returns in with the defaults filled (environment name, now)
// and nil lists and maps made empty, so a Rego policy never meets a null
// where it expects a collection.
func (in Input) normalized() (Input, error) {
	if in.Descriptor == nil {
		return in, errNoDescriptor
	}
	if in.Environment.Name == "" {
		in.Environment.Name = in.Descriptor.Environment
	}
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	in.Now = in.Now.UTC()
	if in.Identity.Groups == nil {
		in.Identity.Groups = []string{}
	}
	if in.Environment.Regions == nil {
		in.Environment.Regions = []string{}
	}
	if in.Target == nil {
		in.Target = map[string]any{}
	}
	if in.Environment.Config == nil {
		in.Environment.Config = map[string]any{}
	}
	if in.Inventory.Successes == nil {
		in.Inventory.Successes = []Success{}
	}
	if in.Inventory.RolledBack == nil {
		in.Inventory.RolledBack = []RolledBack{}
	}
	return in, nil
}
