package manent

import (
	"encoding/json"
	"time"
)

// Deployment is one deploy as users see it (SPEC §7, `status -o json`).
type Deployment struct {
	ID          string     `json:"id"`
	Application string     `json:"application"`
	Environment string     `json:"environment"`
	Version     string     `json:"version"`
	State       State      `json:"state"`
	Requester   string     `json:"requester"`
	CreatedAt   time.Time  `json:"created_at"`
	StartedAt   *time.Time `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	// Error is what a person must read to understand a failure, e.g.
	// `step "deploy" failed: exit status 1`.
	Error string `json:"error"`
	// Rollback is "completed", "failed" or "" (SPEC §4).
	Rollback string `json:"rollback"`
	// Decision is the governance decision saved at submission.
	Decision *Decision `json:"decision"`
	// Reason says why a waiting deploy waits (empty when it does not).
	Reason string `json:"reason,omitempty"`
	// Queued is set on a PENDING deploy that is back in the queue, taken
	// over from a worker that died or left: no step of it runs now (its
	// steps show the attempt that was cut short), and Reason says it waits
	// for a free worker slot.
	Queued         bool   `json:"queued,omitempty"`
	ArtifactSHA256 string `json:"artifact_sha256,omitempty"`
	// RollbackOf is set on a deploy made by `manent rollback`: the id of
	// the deploy whose release was current when it was submitted, the one
	// it goes back from (SPEC §11.5).
	RollbackOf string `json:"rollback_of,omitempty"`
	// Rollout shows each wave of a progressive rollout.
	Rollout []WaveStatus `json:"rollout,omitempty"`
	// PlanDigest binds approvals to this deploy's plan and artifact.
	PlanDigest string `json:"plan_digest,omitempty"`
	// Approvals are the approvals and rejections recorded so far.
	Approvals []Approval `json:"approvals,omitempty"`
	// Deliveries are the callbacks and chat messages sent for this deploy,
	// each with its attempts.
	Deliveries json.RawMessage `json:"deliveries,omitempty"`
	// LogsRemovedFrom, when set, is when retention (retention.logs, or
	// retention.deploys on its way to remove the deploy) began removing
	// its log lines: an empty or partial log is what is left, not the
	// deploy's whole log. Set on GET /api/v1/deployments/{id} only.
	LogsRemovedFrom *time.Time `json:"logs_removed_from,omitempty"`
	Steps           []Step     `json:"steps"`
}

// WaveAwaitingApproval is the State of a rollout wave that waits for its
// approvals (a wave with approval: true).
const WaveAwaitingApproval = "awaiting-approval"

// WaveStatus is the state of one rollout wave: pending, deploying,
// observing, healthy, failed, rolled-back or awaiting-approval.
type WaveStatus struct {
	Name    string   `json:"name"`
	Targets []string `json:"targets,omitempty"`
	Percent int      `json:"percent,omitempty"`
	State   string   `json:"state"`
	Message string   `json:"message,omitempty"`
	// Observe is the wave's observation time ("5m0s"), empty without one;
	// ObserveUntil is when the observation ends, once it started.
	Observe      string     `json:"observe,omitempty"`
	ObserveUntil *time.Time `json:"observe_until,omitempty"`
	// ObserveLeftSeconds is the observation time left when the deploy was
	// read (0 unless the wave is being observed).
	ObserveLeftSeconds int `json:"observe_left_seconds,omitempty"`
	// Gate is the health gate's outcome: "passed", "failed" or empty
	// while it has not run (Message says why it failed).
	Gate string     `json:"gate,omitempty"`
	Time *time.Time `json:"time,omitempty"`
	// ApprovalsRequired is how many approvals the wave needs before it
	// starts (a wave with approval: true), 0 for a wave that needs none;
	// Approvals are the decisions recorded on it so far, oldest first.
	ApprovalsRequired int        `json:"approvals_required,omitempty"`
	Approvals         []Approval `json:"approvals,omitempty"`
}

// ObserveLeft is the observation time left at now while the wave is
// observed, 0 otherwise.
func (w WaveStatus) ObserveLeft(now time.Time) time.Duration {
	if w.ObserveUntil == nil || w.State != "observing" {
		return 0
	}
	return max(w.ObserveUntil.Sub(now), 0)
}

// Step is one recorded step of a deploy (SPEC §7).
type Step struct {
	Name       string          `json:"name"`
	State      StepState       `json:"state"`
	Attempts   int             `json:"attempts"`
	StartedAt  *time.Time      `json:"started_at"`
	FinishedAt *time.Time      `json:"finished_at"`
	Output     json.RawMessage `json:"output"`
	Error      string          `json:"error"`
	// NextAttemptAt is set while the step waits between two attempts: its
	// last attempt failed with Error, the step is still RUNNING, and its
	// next attempt (of at most MaxAttempts) is due then. Unset otherwise,
	// and on every step an earlier release recorded (that release showed
	// the step ERROR between attempts).
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	MaxAttempts   int        `json:"max_attempts,omitempty"`
}

// Retrying reports whether the step waits between two attempts: its last
// attempt failed, another will run, and Error is the failed attempt's.
func (s Step) Retrying() bool {
	return s.State == StepRunning && s.NextAttemptAt != nil
}

// Duration returns how long the step ran, or 0 when it has not finished.
func (s Step) Duration() time.Duration {
	if s.StartedAt == nil || s.FinishedAt == nil {
		return 0
	}
	return s.FinishedAt.Sub(*s.StartedAt)
}

// Decision is the governance decision for a deploy (SPEC §3 check 5).
type Decision struct {
	Allowed           bool     `json:"allowed"`
	Deny              []string `json:"deny,omitempty"`
	ApprovalsRequired int      `json:"approvals_required,omitempty"`
	Approvers         []string `json:"approvers,omitempty"`
	ChangeRequired    bool     `json:"change_required,omitempty"`
	// ApprovalsExpire is how long approvals may take (a Go duration).
	ApprovalsExpire string `json:"approvals_expire,omitempty"`
	Freeze          string `json:"freeze,omitempty"`
	Source          string `json:"source,omitempty"`
}

// LogLine is one line of a deploy's log.
type LogLine struct {
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time"`
	Step string    `json:"step,omitempty"`
	Text string    `json:"text"`
}

// Release is an environment's current release or last failure in the inventory.
type Release struct {
	DeploymentID string     `json:"deployment_id"`
	Version      string     `json:"version"`
	SHA256       string     `json:"sha256,omitempty"`
	FinishedAt   *time.Time `json:"finished_at"`
	Error        string     `json:"error,omitempty"`
	Rollback     string     `json:"rollback,omitempty"`
}

// InventoryEntry is the current release and last failure of one
// application/environment.
type InventoryEntry struct {
	Application string   `json:"application"`
	Environment string   `json:"environment"`
	Current     *Release `json:"current"`
	LastFailure *Release `json:"last_failure"`
}

// Approval is one identity's approval or rejection of a waiting deploy.
type Approval struct {
	Identity   string    `json:"identity"`
	Verdict    string    `json:"verdict"` // "approve" or "reject"
	Comment    string    `json:"comment,omitempty"`
	PlanDigest string    `json:"plan_digest"`
	Time       time.Time `json:"time"`
}
