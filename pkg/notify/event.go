package notify

import (
	"slices"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// EventType is the `type` of a callback body (SPEC §8.1). The names are a
// contract, as are the callback `events` a descriptor may ask for.
type EventType string

// Event types.
const (
	EventStarted  EventType = "started"
	EventStep     EventType = "step"
	EventFinished EventType = "finished"
)

// EventTypes lists every event type in lifecycle order.
var EventTypes = []EventType{EventStarted, EventStep, EventFinished}

// Event is the JSON body of a callback (SPEC §8.1):
//
//	{"type", "deployment": {id, application, environment, version, state,
//	 error, rollback}, "step"?: {name, state, attempts, error, started_at,
//	 finished_at}, "timestamp"}
//
// Timestamp is when the event happened, fixed when the event is made: it is
// part of the body, so it stays the same on every retry, unlike the
// webhook-timestamp header, which is the time of the attempt.
type Event struct {
	Type       EventType     `json:"type"`
	Deployment DeploymentRef `json:"deployment"`
	Step       *StepRef      `json:"step,omitempty"`
	Timestamp  time.Time     `json:"timestamp"`
}

// DeploymentRef is the deployment an event is about.
type DeploymentRef struct {
	ID          string       `json:"id"`
	Application string       `json:"application"`
	Environment string       `json:"environment"`
	Version     string       `json:"version"`
	State       manent.State `json:"state"`
	// Error is what a person must read to understand a failure ("" on success).
	Error string `json:"error"`
	// Rollback is "completed", "failed" or "" (SPEC §4).
	Rollback string `json:"rollback"`
	// RollbackOf is set on a deploy made by `manent rollback`: the deploy
	// it goes back from (its callbacks go to the URLs of the descriptor it
	// reuses, perhaps an old pipeline's, which can tell it from this).
	RollbackOf string `json:"rollback_of,omitempty"`
}

// StepRef is the step a `step` event is about.
type StepRef struct {
	Name       string           `json:"name"`
	State      manent.StepState `json:"state"`
	Attempts   int              `json:"attempts"`
	Error      string           `json:"error"`
	StartedAt  *time.Time       `json:"started_at"`
	FinishedAt *time.Time       `json:"finished_at"`
}

// Callback is one callback of a descriptor (SPEC §2 `callbacks`).
type Callback struct {
	URL string `json:"url"`
	// Events are the event types the callback wants; empty means all.
	Events []string `json:"events,omitempty"`
}

// Wants reports whether the callback asked for events of type t.
func (c Callback) Wants(t EventType) bool {
	return len(c.Events) == 0 || slices.Contains(c.Events, string(t))
}
