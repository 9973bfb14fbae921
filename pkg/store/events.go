package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// Event types (SSE types of SPEC §7).
const (
	EventState    = "state"
	EventStep     = "step"
	EventLog      = "log"
	EventRollout  = "rollout"
	EventApproval = "approval"
	EventDone     = "done"
)

// Event is one recorded event of a deploy.
type Event struct {
	DeploymentID string          `json:"deployment_id"`
	Seq          int64           `json:"seq"`
	Type         string          `json:"type"`
	Time         time.Time       `json:"time"`
	Data         json.RawMessage `json:"data"`
}

// StateData is the data of a `state` event.
type StateData struct {
	State  manent.State `json:"state"`
	Reason string       `json:"reason,omitempty"`
	Error  string       `json:"error,omitempty"`
}

func stateEvent(st manent.State, reason, errText string) StateData {
	return StateData{State: st, Reason: reason, Error: errText}
}

// LogData is the data of a `log` event.
type LogData struct {
	Step string `json:"step,omitempty"`
	Text string `json:"text"`
}

// DoneData is the data of the `done` event.
type DoneData struct {
	State    manent.State `json:"state"`
	Error    string       `json:"error,omitempty"`
	Rollback string       `json:"rollback,omitempty"`
}

// appendEvent appends an event with the deploy's next sequence number.
func (s *Store) appendEvent(ctx context.Context, tx *sql.Tx, id, typ string, at time.Time, data any) (int64, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return 0, err
	}
	var seq int64
	if err := tx.QueryRowContext(ctx, s.q(`UPDATE manent_deployments SET next_seq = next_seq + 1 WHERE id = ? RETURNING next_seq - 1`), id).Scan(&seq); err != nil {
		return 0, fmt.Errorf("next event id of %s: %w", id, err)
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_events (deployment_id, seq, type, time, data) VALUES (?, ?, ?, ?, ?)`),
		id, seq, typ, fmtTime(at), string(b)); err != nil {
		return 0, fmt.Errorf("append event: %w", err)
	}
	s.hooks.record(tx, Event{DeploymentID: id, Seq: seq, Type: typ, Time: at.UTC(), Data: json.RawMessage(b)})
	return seq, nil
}

// newEvent is an event to append.
type newEvent struct {
	typ  string
	at   time.Time
	data any
}

// appendEvents appends events with the deploy's next sequence numbers: one
// sequence bump and one INSERT per 50 events, where appendEvent costs two
// statements per event.
func (s *Store) appendEvents(ctx context.Context, tx *sql.Tx, id string, evs []newEvent) error {
	if len(evs) == 0 {
		return nil
	}
	var first int64
	if err := tx.QueryRowContext(ctx, s.q(`UPDATE manent_deployments SET next_seq = next_seq + ? WHERE id = ? RETURNING next_seq - ?`),
		len(evs), id, len(evs)).Scan(&first); err != nil {
		return fmt.Errorf("next event ids of %s: %w", id, err)
	}
	const chunk = 50
	for lo := 0; lo < len(evs); lo += chunk {
		hi := min(lo+chunk, len(evs))
		var b strings.Builder
		b.WriteString(`INSERT INTO manent_events (deployment_id, seq, type, time, data) VALUES `)
		args := make([]any, 0, (hi-lo)*5)
		recs := make([]Event, 0, hi-lo)
		for i := lo; i < hi; i++ {
			e := evs[i]
			raw, err := json.Marshal(e.data)
			if err != nil {
				return err
			}
			if i > lo {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?)")
			seq := first + int64(i)
			args = append(args, id, seq, e.typ, fmtTime(e.at), string(raw))
			recs = append(recs, Event{DeploymentID: id, Seq: seq, Type: e.typ, Time: e.at.UTC(), Data: json.RawMessage(raw)})
		}
		if _, err := tx.ExecContext(ctx, s.q(b.String()), args...); err != nil {
			return fmt.Errorf("append events: %w", err)
		}
		for _, r := range recs {
			s.hooks.record(tx, r)
		}
	}
	return nil
}

// AppendLog appends log lines of a step to a deploy's log.
func (s *Store) AppendLog(ctx context.Context, id, step string, lines []LogEntry) error {
	return s.Tx(ctx, func(tx *sql.Tx) error {
		return s.appendEvents(ctx, tx, id, logEvents(step, lines))
	})
}

func logEvents(step string, lines []LogEntry) []newEvent {
	evs := make([]newEvent, 0, len(lines)+1)
	for _, l := range lines {
		evs = append(evs, newEvent{typ: EventLog, at: l.Time, data: LogData{Step: step, Text: l.Text}})
	}
	return evs
}

// Events returns a deploy's events with seq > after, in order, at most limit (0: all).
func (s *Store) Events(ctx context.Context, id string, after int64, types []string, limit int) ([]Event, error) {
	query := `SELECT deployment_id, seq, type, time, data FROM manent_events WHERE deployment_id = ? AND seq > ?`
	args := []any{id, after}
	if len(types) > 0 {
		query += " AND type IN ("
		for i, t := range types {
			if i > 0 {
				query += ","
			}
			query += "?"
			args = append(args, t)
		}
		query += ")"
	}
	query += " ORDER BY seq"
	if limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := s.rdb.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var at, data string
		if err := rows.Scan(&e.DeploymentID, &e.Seq, &e.Type, &at, &data); err != nil {
			return nil, err
		}
		if t := parseTime(sql.NullString{String: at, Valid: true}); t != nil {
			e.Time = *t
		}
		e.Data = json.RawMessage(data)
		out = append(out, e)
	}
	return out, rows.Err()
}

// Logs returns a deploy's log lines.
func (s *Store) Logs(ctx context.Context, id string, after int64) ([]manent.LogLine, error) {
	evs, err := s.Events(ctx, id, after, []string{EventLog}, 0)
	if err != nil {
		return nil, err
	}
	out := make([]manent.LogLine, 0, len(evs))
	for _, e := range evs {
		var d LogData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return nil, fmt.Errorf("log line %d of %s: %w", e.Seq, id, err)
		}
		out = append(out, manent.LogLine{Seq: e.Seq, Time: e.Time, Step: d.Step, Text: d.Text})
	}
	return out, nil
}
