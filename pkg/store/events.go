package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
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

// A deploy's events are numbered 1, 2, 3… in the order their transactions
// commit, which SSE resumption (Last-Event-ID) and log cursors rely on. On
// PostgreSQL the deploy row's next_seq hands the numbers out: its row lock
// orders concurrent appenders. On SQLite one writer at a time holds the
// database, so the next number is read from the events' own primary key in
// the write transaction — which leaves the deploy's row (and its page)
// untouched by every step (next_seq is not kept up to date there).
const sqliteNextSeq = `SELECT COALESCE((SELECT MAX(seq) FROM manent_events WHERE deployment_id = ?), 0) + 1, cancel_requested
	FROM manent_deployments WHERE id = ?`

// appendEvent appends an event with the deploy's next sequence number.
func (s *Store) appendEvent(ctx context.Context, tx *sql.Tx, id, typ string, at time.Time, data any) (int64, error) {
	if s.postgres {
		seq, _, err := s.appendEventsPG(ctx, tx, id, []newEvent{{typ: typ, at: at, data: data}})
		return seq, err
	}
	b, err := json.Marshal(data)
	if err != nil {
		return 0, err
	}
	var seq int64
	if err := tx.QueryRowContext(ctx, sqliteNextSeq, id, id).Scan(&seq, new(int)); err != nil {
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
	_, err := s.appendEventsCancel(ctx, tx, id, evs)
	return err
}

// appendEventsCancel is appendEvents that also returns the deploy's cancel
// flag as the sequence bump read it (false when evs is empty).
func (s *Store) appendEventsCancel(ctx context.Context, tx *sql.Tx, id string, evs []newEvent) (bool, error) {
	if len(evs) == 0 {
		return false, nil
	}
	if s.postgres && len(evs) <= appendChunk {
		_, cancel, err := s.appendEventsPG(ctx, tx, id, evs)
		return cancel, err
	}
	var first int64
	var cancel int
	var row *sql.Row
	if s.postgres {
		row = tx.QueryRowContext(ctx, s.q(`UPDATE manent_deployments SET next_seq = next_seq + ? WHERE id = ? RETURNING next_seq - ?, cancel_requested`),
			len(evs), id, len(evs))
	} else {
		row = tx.QueryRowContext(ctx, sqliteNextSeq, id, id)
	}
	if err := row.Scan(&first, &cancel); err != nil {
		return false, fmt.Errorf("next event ids of %s: %w", id, err)
	}
	for lo := 0; lo < len(evs); lo += appendChunk {
		hi := min(lo+appendChunk, len(evs))
		var b strings.Builder
		b.WriteString(`INSERT INTO manent_events (deployment_id, seq, type, time, data) VALUES `)
		args := make([]any, 0, (hi-lo)*5)
		recs := make([]Event, 0, hi-lo)
		for i := lo; i < hi; i++ {
			e := evs[i]
			raw, err := json.Marshal(e.data)
			if err != nil {
				return false, err
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
			return false, fmt.Errorf("append events: %w", err)
		}
		for _, r := range recs {
			s.hooks.record(tx, r)
		}
	}
	return cancel != 0, nil
}

// appendChunk is how many events one INSERT appends at most.
const appendChunk = 50

// appendEventsPG is appendEventsCancel in one statement on PostgreSQL: the
// sequence bump (which, as a row lock, orders the deploy's appenders) and
// the INSERT, one round trip where two statements take two. It returns the
// first event's sequence number and the deploy's cancel flag.
func (s *Store) appendEventsPG(ctx context.Context, tx *sql.Tx, id string, evs []newEvent) (int64, bool, error) {
	var b strings.Builder
	b.WriteString(`WITH n AS (UPDATE manent_deployments SET next_seq = next_seq + ? WHERE id = ? RETURNING next_seq - ? AS first, cancel_requested)
		INSERT INTO manent_events (deployment_id, seq, type, time, data)
		SELECT ?, n.first + v.o, v.t, v.ti, v.d FROM n, (VALUES `)
	args := make([]any, 0, 4+len(evs)*4)
	args = append(args, len(evs), id, len(evs), id)
	recs := make([]Event, len(evs))
	for i, e := range evs {
		raw, err := json.Marshal(e.data)
		if err != nil {
			return 0, false, err
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(" + strconv.Itoa(i) + "::bigint, ?::text, ?::text, ?::text)")
		args = append(args, e.typ, fmtTime(e.at), string(raw))
		recs[i] = Event{DeploymentID: id, Type: e.typ, Time: e.at.UTC(), Data: json.RawMessage(raw)}
	}
	b.WriteString(`) AS v(o, t, ti, d) RETURNING seq, (SELECT cancel_requested FROM n)`)
	rows, err := tx.QueryContext(ctx, s.q(b.String()), args...)
	if err != nil {
		return 0, false, fmt.Errorf("append events: %w", err)
	}
	defer rows.Close()
	var seqs []int64
	cancel := 0
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq, &cancel); err != nil {
			return 0, false, fmt.Errorf("append events: %w", err)
		}
		seqs = append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return 0, false, fmt.Errorf("append events: %w", err)
	}
	if len(seqs) != len(evs) {
		return 0, false, fmt.Errorf("next event ids of %s: %w", id, sql.ErrNoRows)
	}
	slices.Sort(seqs)
	for i := range recs {
		recs[i].Seq = seqs[i]
		s.hooks.record(tx, recs[i])
	}
	return seqs[0], cancel != 0, nil
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
	evs, _, err := s.EventsUpTo(ctx, id, after, types, limit, 0)
	return evs, err
}

// EventsUpTo is Events that also stops once the events read hold maxBytes
// of data (0: no bound; the first event is returned whatever its size):
// a page of a history whose events may each weigh about 100 kB (a 16 KiB
// log line of control characters, stored JSON-escaped). full reports that
// it stopped at limit or maxBytes: more events may follow.
func (s *Store) EventsUpTo(ctx context.Context, id string, after int64, types []string, limit, maxBytes int) (evs []Event, full bool, err error) {
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
		return nil, false, err
	}
	defer rows.Close()
	var out []Event
	size := 0
	for rows.Next() {
		var e Event
		var at, data string
		if err := rows.Scan(&e.DeploymentID, &e.Seq, &e.Type, &at, &data); err != nil {
			return nil, false, err
		}
		if t := parseTime(sql.NullString{String: at, Valid: true}); t != nil {
			e.Time = *t
		}
		e.Data = json.RawMessage(data)
		out = append(out, e)
		if size += len(data); maxBytes > 0 && size >= maxBytes {
			return out, true, rows.Err()
		}
	}
	return out, limit > 0 && len(out) == limit, rows.Err()
}

// Logs returns a deploy's log lines.
func (s *Store) Logs(ctx context.Context, id string, after int64, limit int) ([]manent.LogLine, error) {
	lines, _, err := s.LogsUpTo(ctx, id, after, limit, 0)
	return lines, err
}

// LogsUpTo is Logs that stops, like EventsUpTo, once the lines read weigh
// maxBytes as stored (JSON, about what they weigh in an answer); full
// reports that more lines may follow.
func (s *Store) LogsUpTo(ctx context.Context, id string, after int64, limit, maxBytes int) (lines []manent.LogLine, full bool, err error) {
	evs, full, err := s.EventsUpTo(ctx, id, after, []string{EventLog}, limit, maxBytes)
	if err != nil {
		return nil, false, err
	}
	out := make([]manent.LogLine, 0, len(evs))
	for _, e := range evs {
		var d LogData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return nil, false, fmt.Errorf("log line %d of %s: %w", e.Seq, id, err)
		}
		out = append(out, manent.LogLine{Seq: e.Seq, Time: e.Time, Step: d.Step, Text: d.Text})
	}
	return out, full, nil
}
