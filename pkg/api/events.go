package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// Server-Sent Event types (SPEC §7 [contract]).
const (
	EventState    = "state"
	EventStep     = "step"
	EventLog      = "log"
	EventRollout  = "rollout"
	EventApproval = "approval"
	EventDone     = "done"
)

// Event is the `data:` of one Server-Sent Event of
// GET /api/v1/deployments/{id}/events (and of …/logs?follow=true and
// GET /api/v1/events). The SSE `id:` is Seq on a deploy's stream, and
// "<deployment_id>:<seq>" on the global stream. Data depends on Type:
// EventStateData, manent.Step, EventLogData, EventDoneData.
type Event struct {
	DeploymentID string          `json:"deployment_id"`
	Seq          int64           `json:"seq"`
	Type         string          `json:"type"`
	Time         time.Time       `json:"time"`
	Data         json.RawMessage `json:"data"`
}

// EventStateData is the data of a `state` event.
type EventStateData struct {
	State  manent.State `json:"state"`
	Reason string       `json:"reason,omitempty"`
	Error  string       `json:"error,omitempty"`
}

// EventLogData is the data of a `log` event.
type EventLogData struct {
	Step string `json:"step,omitempty"`
	Text string `json:"text"`
}

// EventDoneData is the data of the `done` event, the last of a deploy.
type EventDoneData struct {
	State    manent.State `json:"state"`
	Error    string       `json:"error,omitempty"`
	Rollback string       `json:"rollback,omitempty"`
}

// ActivityResult answers GET /api/v1/activity: every deploy running or
// waiting now, grouped by environment (sorted by name).
type ActivityResult struct {
	Environments []ActivityGroup `json:"environments"`
}

// ActivityGroup is the activity of one environment.
type ActivityGroup struct {
	Environment string         `json:"environment"`
	Items       []ActivityItem `json:"items"`
	// Total is how many deploys run or wait there: more than Items when
	// ?limit= or ?from= cut them.
	Total int `json:"total"`
}

// ActivityItem is one running or waiting deploy and why it waits.
type ActivityItem struct {
	ID          string       `json:"id"`
	Application string       `json:"application"`
	Environment string       `json:"environment"`
	Version     string       `json:"version"`
	State       manent.State `json:"state"`
	Requester   string       `json:"requester"`
	CreatedAt   time.Time    `json:"created_at"`
	StartedAt   *time.Time   `json:"started_at"`
	// Reason says why a waiting deploy waits; of a running one, that a
	// cancel is pending or that its worker is dead, else empty.
	Reason string `json:"reason"`
	// QueuePosition is the place of an ENQUEUED deploy in its
	// application/environment, counting the running deploy (1 = next).
	QueuePosition int `json:"queue_position,omitempty"`
	// Ahead is the deploy just before it in that line, and AheadState its state.
	Ahead      string       `json:"ahead,omitempty"`
	AheadState manent.State `json:"ahead_state,omitempty"`
	// Step is the step a running deploy is in, and StepAttempts its attempt.
	Step         string `json:"step,omitempty"`
	StepAttempts int    `json:"step_attempts,omitempty"`
	// StepNextAttemptAt and StepMaxAttempts are set while the step waits
	// between two attempts (manent.Step.Retrying): attempt StepAttempts
	// failed and the next, of at most StepMaxAttempts, starts then.
	StepNextAttemptAt *time.Time `json:"step_next_attempt_at,omitempty"`
	StepMaxAttempts   int        `json:"step_max_attempts,omitempty"`
	// Queued is set on a PENDING deploy back in the queue, taken over from
	// a worker that died or left (manent.Deployment.Queued): no step runs.
	Queued bool `json:"queued,omitempty"`
}

// Why says what the deploy does or waits for, as `manent activity` and the
// web activity page show it: the step a running deploy runs ("running step
// deploy (attempt 2)", "running step deploy: attempt 2 of 5 failed; the
// next starts at <time>" between two attempts) followed by its reason if it has one, else the
// reason a waiting deploy waits.
func (it ActivityItem) Why() string {
	if it.State != manent.StatePending || it.Queued {
		return it.Reason
	}
	line := "running"
	if it.Step != "" {
		line = "running step " + it.Step
		if it.StepNextAttemptAt != nil {
			line += fmt.Sprintf(": attempt %d", it.StepAttempts)
			if it.StepMaxAttempts >= it.StepAttempts {
				line += fmt.Sprintf(" of %d", it.StepMaxAttempts)
			}
			line += " failed; the next starts at " + it.StepNextAttemptAt.UTC().Format(time.RFC3339)
		} else if it.StepAttempts > 1 {
			line += fmt.Sprintf(" (attempt %d)", it.StepAttempts)
		}
	}
	if it.Reason != "" {
		line += "; " + it.Reason
	}
	return line
}

// Activity returns everything running or waiting now.
func (c *Client) Activity(ctx context.Context) (*ActivityResult, error) {
	return c.ActivityQuery(ctx, nil)
}

// ActivityQuery is Activity narrowed by q: application, environment, and
// limit and from to page through each environment's deploys.
func (c *Client) ActivityQuery(ctx context.Context, q url.Values) (*ActivityResult, error) {
	var out ActivityResult
	path := "/api/v1/activity"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	err := c.do(ctx, http.MethodGet, path, "", nil, &out)
	return &out, err
}

// EventsURL returns the URL of a deploy's event stream; logsOnly selects
// the log stream (…/logs?follow=true) instead.
func (c *Client) EventsURL(id string, logsOnly bool) string {
	if logsOnly {
		return c.base + "/api/v1/deployments/" + url.PathEscape(id) + "/logs?follow=true"
	}
	return c.base + "/api/v1/deployments/" + url.PathEscape(id) + "/events"
}

// ProblemError turns an HTTP error answer (status >= 400) and its body into
// the error the client's other calls return: a *manent.Error for 4xx, a
// *ServerError for 5xx, wrapping a *NotAPIAnswerError when the body is not
// a problem+json document. Stream readers use it for the answer to their
// first request.
func (c *Client) ProblemError(resp *http.Response, body []byte) error {
	return answerError(c.base, resp, body)
}
