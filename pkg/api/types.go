package api

import (
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// ProblemContentType is the media type of every HTTP error (RFC 9457).
const ProblemContentType = "application/problem+json"

// Problem is an RFC 9457 problem document; Errors lists field errors (422).
type Problem struct {
	Type   string              `json:"type,omitempty"`
	Title  string              `json:"title"`
	Status int                 `json:"status"`
	Detail string              `json:"detail,omitempty"`
	Errors []manent.FieldError `json:"errors,omitempty"`
	// LastEventID is set on the 422 of a deploy's event stream asked to
	// resume after an id past its last event: the id of that last event,
	// to resume from. A client that did see the id it sent meets it when
	// the server's database was restored from an older backup.
	LastEventID *int64 `json:"last_event_id,omitempty"`
}

// MaxComment is the longest approval or rejection comment the API takes,
// in bytes.
const MaxComment = 4096

// SubmitResult answers POST /api/v1/deployments: {"id","state"} for a deploy
// (202), a schedule id for a recurring one (201). A dry run (validate) fills
// Valid, Errors, Plan and Effective instead.
type SubmitResult struct {
	ID    string       `json:"id,omitempty"`
	State manent.State `json:"state,omitempty"`
	// Schedule is set for a recurring deploy (201).
	Schedule string `json:"schedule,omitempty"`
	// Notice carries what the server wants the submitter to know, e.g. that the
	// environment configuration was unreachable and will be checked by the worker.
	Notice string `json:"notice,omitempty"`

	Valid     *bool               `json:"valid,omitempty"`
	Errors    []manent.FieldError `json:"errors,omitempty"`
	Plan      *manent.Plan        `json:"plan,omitempty"`
	Effective map[string]any      `json:"effective,omitempty"`
	// Decision is the governance decision (dry run): what the deploy
	// would wait for.
	Decision *manent.Decision `json:"decision,omitempty"`
}

// ListOptions filter GET /api/v1/deployments.
type ListOptions struct {
	Application string
	Environment string
	State       string
	Limit       int
	Cursor      string
}

// ListResult is one page of deployments, newest first.
type ListResult struct {
	Items      []manent.Deployment `json:"items"`
	NextCursor string              `json:"next_cursor,omitempty"`
}

// StepsResult answers GET /api/v1/deployments/{id}/steps.
type StepsResult struct {
	Steps []manent.Step `json:"steps"`
}

// LogsResult is the log of a deploy.
type LogsResult struct {
	Lines []manent.LogLine `json:"lines"`
	State manent.State     `json:"state"`
	// NextAfter, when set, is the ?after= of the next page: the log goes
	// on past this one (MaxLogPage lines or MaxLogPageBytes of text as JSON).
	NextAfter int64 `json:"next_after,omitempty"`
	// LogsRemovedFrom, when set, is when retention (retention.logs, or
	// retention.deploys on its way to remove the deploy) began removing
	// the deploy's log lines: the lines here, if any, are what is left.
	LogsRemovedFrom *time.Time `json:"logs_removed_from,omitempty"`
}

// The most one page of GET /api/v1/deployments/{id}/logs holds: ?limit=
// lines (default and most MaxLogPage), and no more lines once their text,
// as JSON (a control character is six bytes, "\u0000"), passes
// MaxLogPageBytes.
const (
	MaxLogPage      = 10_000
	MaxLogPageBytes = 4 << 20
)

// InventoryResult lists the current release and last failure per application/environment.
type InventoryResult struct {
	Items []manent.InventoryEntry `json:"items"`
}

// Health answers /healthz and /readyz.
type Health struct {
	Status string    `json:"status"`
	Time   time.Time `json:"time"`
}

// Schedule is a recurring deploy (GET /api/v1/schedules).
type Schedule struct {
	ID          string     `json:"id"`
	Application string     `json:"application"`
	Environment string     `json:"environment"`
	Cron        string     `json:"cron"`
	State       string     `json:"state"`
	Requester   string     `json:"requester"`
	CreatedAt   time.Time  `json:"created_at"`
	DeletedAt   *time.Time `json:"deleted_at,omitempty"`
	LastTick    *time.Time `json:"last_tick,omitempty"`
	LastDeploy  string     `json:"last_deploy,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	// NextTick is when the schedule fires next (UTC; absent once deleted).
	// For @every it counts from the last tick.
	NextTick *time.Time `json:"next_tick,omitempty"`
}

// SchedulesResult lists schedules.
type SchedulesResult struct {
	Items []Schedule `json:"items"`
}

// AuditEntry is one row of the audit log.
type AuditEntry struct {
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	Identity  string    `json:"identity"`
	Action    string    `json:"action"`
	Target    string    `json:"target"`
	RequestID string    `json:"request_id"`
	Outcome   string    `json:"outcome"`
	Detail    string    `json:"detail,omitempty"`
	// ClientAddr and UserAgent name the client of the request that made
	// the entry (bounded to 64 and 256 bytes): absent for an entry no
	// request made (a schedule's tick) and for one written before the
	// 2026-12-06 release.
	ClientAddr string `json:"client_addr,omitempty"`
	UserAgent  string `json:"user_agent,omitempty"`
	PrevHash   string `json:"prev_hash"`
	Hash       string `json:"hash"`
}

// AuditResult is one page of the audit log, newest first.
type AuditResult struct {
	Items      []AuditEntry `json:"items"`
	NextBefore int64        `json:"next_before,omitempty"`
}

// Worker is one manent-server process sharing the database (SPEC §11.3):
// GET /api/v1/workers.
type Worker struct {
	ID string `json:"id"`
	// State is alive, leaving (stopping: its deploys are handed over) or
	// dead (silent for workers.dead_after, or gone).
	State    string    `json:"state"`
	LastSeen time.Time `json:"last_seen"`
	// Running is the number of its deploys (PENDING under its executor
	// id) that hold one of its slots — at most its workers.slots; on a
	// dead worker, with Waiting, the deploys waiting to be taken over.
	Running int `json:"running"`
	// Waiting is the number of its deploys that hold no slot, as of its
	// last heartbeat: between rollout waves, waiting for an approval, a
	// freeze, an observation, or for a slot back. 0 on a worker of an
	// earlier version, whose Running counts them.
	Waiting   int        `json:"waiting"`
	StartedAt time.Time  `json:"started_at"`
	Version   string     `json:"version,omitempty"`
	TakenOver *time.Time `json:"taken_over_at,omitempty"`
	// TakenOverBy is the worker that took a dead worker's deploys over.
	TakenOverBy string `json:"taken_over_by,omitempty"`
	// Config compares its policy-relevant configuration (governance,
	// rbac, auth subjects, plugins.steps, allow-lists, workflow version)
	// with the live workers': "same", "differs from w1, w2 (governance)",
	// or "unknown" (started by an earlier version).
	Config string `json:"config,omitempty"`
}

// WorkersResult is GET /api/v1/workers.
type WorkersResult struct {
	Items []Worker `json:"items"`
}
