package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// PlanSteps records the planned steps of a deploy as PENDING rows, so the
// step table shows the whole plan from the start.
func (s *Store) PlanSteps(ctx context.Context, tx *sql.Tx, id string, names []string) error {
	// One statement for the whole plan: the submit transaction holds the
	// write lock, and a plan has up to 200 steps.
	const perRow = 4
	for start := 0; start < len(names); start += 200 {
		end := min(start+200, len(names))
		var b strings.Builder
		args := make([]any, 0, (end-start)*perRow)
		b.WriteString(`INSERT INTO manent_steps (deployment_id, position, name, state) VALUES `)
		for i := start; i < end; i++ {
			if i > start {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?)")
			args = append(args, id, (i+1)*10, names[i], string(manent.StepPending))
		}
		b.WriteString(` ON CONFLICT (deployment_id, name) DO NOTHING`)
		if _, err := tx.ExecContext(ctx, s.q(b.String()), args...); err != nil {
			return err
		}
	}
	return nil
}

// StepStarted marks a step RUNNING since at and counts one more attempt. A
// step not in the plan (rollback, checkpoint…) is appended after the last one.
func (s *Store) StepStarted(ctx context.Context, id, name string, at time.Time) (manent.Step, error) {
	var st manent.Step
	err := s.Tx(ctx, func(tx *sql.Tx) error {
		// One round trip each: the row comes back with the write.
		var err error
		st, err = scanStep(tx.QueryRowContext(ctx, s.q(`UPDATE manent_steps SET state = ?, attempts = attempts + 1,
			started_at = COALESCE(started_at, ?), finished_at = NULL, error = '', next_attempt_at = NULL WHERE deployment_id = ? AND name = ?
			RETURNING `+stepColumns),
			string(manent.StepRunning), fmtTime(at), id, name))
		if errors.Is(err, sql.ErrNoRows) {
			st, err = scanStep(tx.QueryRowContext(ctx, s.q(`INSERT INTO manent_steps (deployment_id, position, name, state, attempts, started_at)
				SELECT ?, COALESCE(MAX(CASE WHEN state <> 'PENDING' THEN position END), 0) + 1, ?, ?, 1, ? FROM manent_steps WHERE deployment_id = ?
				RETURNING `+stepColumns),
				id, name, string(manent.StepRunning), fmtTime(at), id))
		}
		if err != nil {
			return err
		}
		_, err = s.appendEvent(ctx, tx, id, EventStep, at, st)
		return err
	})
	return st, err
}

// LogEntry is one log line with the time it was written.
type LogEntry struct {
	Time time.Time
	Text string
}

// StepEnd is how one attempt of a step ended.
type StepEnd struct {
	State  manent.StepState
	Output any
	Error  string
	// StartedAt is when the attempt started; Counted says whether
	// StepStarted already recorded it (a short step is recorded only here).
	StartedAt time.Time
	Counted   bool
	// Logs are the step's log lines not written yet.
	Logs []LogEntry
	// Pending moves the deploy to PENDING first (its first step ends
	// before anything showed it running).
	Pending bool
	// Also, when set, runs last in the transaction that records the end,
	// with the step as recorded (the engine records the DBOS step's
	// checkpoint there, and queues the step's callbacks).
	Also func(tx *sql.Tx, st manent.Step) error
	// NextAttemptAt, with State RUNNING, records an attempt that failed
	// with Error when another of at most MaxAttempts will run then: the
	// step has no result yet (manent.Step.Retrying).
	NextAttemptAt *time.Time
	MaxAttempts   int
	// CancelRequested, when set, receives the deploy's cancel flag as the
	// transaction that records the end read it (RequestCancel): the engine
	// checks it before the next step without reading it again.
	CancelRequested *bool
}

// StepFinished records the end of an attempt — SUCCESS with its output,
// ERROR with its error, RUNNING with its error and end.NextAttemptAt when
// another attempt follows, or SKIPPED — with the
// step's pending log lines, in one transaction; end.Also, when set, runs
// last in that transaction.
func (s *Store) StepFinished(ctx context.Context, id, name string, end StepEnd) (manent.Step, error) {
	var st manent.Step
	err := s.Tx(ctx, func(tx *sql.Tx) (err error) {
		st, err = s.StepFinishedTx(ctx, tx, id, name, end)
		return err
	})
	return st, err
}

// StepFinishedTx is StepFinished in tx: a caller that decides a step's end
// under the deploy's row lock (a wave's approval) records it in the same
// transaction, so no decision recorded after can find the step still
// waiting.
func (s *Store) StepFinishedTx(ctx context.Context, tx *sql.Tx, id, name string, end StepEnd) (manent.Step, error) {
	var st manent.Step
	if end.Pending {
		if _, err := s.SetStateTx(ctx, tx, id, manent.StatePending, ""); err != nil {
			return st, err
		}
	}
	now := time.Now()
	var out any
	if end.Output != nil {
		b, err := json.Marshal(end.Output)
		if err != nil {
			return st, err
		}
		out = string(b)
	}
	add := 0
	if !end.Counted && !end.StartedAt.IsZero() {
		add = 1
	}
	// A step between attempts has no end yet.
	finished := fmtTimePtr(&now)
	if end.NextAttemptAt != nil {
		finished = nil
	}
	var err error
	st, err = scanStep(tx.QueryRowContext(ctx, s.q(`UPDATE manent_steps SET state = ?, finished_at = ?, output = ?, error = ?,
		attempts = attempts + ?, started_at = COALESCE(started_at, ?), next_attempt_at = ?,
		max_attempts = CASE WHEN ? > 0 THEN ? ELSE max_attempts END WHERE deployment_id = ? AND name = ? RETURNING `+stepColumns),
		string(end.State), finished, out, end.Error, add, fmtTimePtr(&end.StartedAt), fmtTimePtr(end.NextAttemptAt),
		end.MaxAttempts, end.MaxAttempts, id, name))
	if errors.Is(err, sql.ErrNoRows) {
		st, err = scanStep(tx.QueryRowContext(ctx, s.q(`INSERT INTO manent_steps (deployment_id, position, name, state, attempts, started_at, finished_at, output, error, next_attempt_at, max_attempts)
			SELECT ?, COALESCE(MAX(CASE WHEN state <> 'PENDING' THEN position END), 0) + 1, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM manent_steps WHERE deployment_id = ?
			RETURNING `+stepColumns),
			id, name, string(end.State), add, fmtTimePtr(&end.StartedAt), finished, out, end.Error, fmtTimePtr(end.NextAttemptAt), end.MaxAttempts, id))
	}
	if err != nil {
		return st, err
	}
	// The log lines, then the step event: one sequence bump, one INSERT.
	evs := append(logEvents(name, end.Logs), newEvent{typ: EventStep, at: now, data: st})
	cancel, err := s.appendEventsCancel(ctx, tx, id, evs)
	if err != nil {
		return st, err
	}
	if end.CancelRequested != nil {
		*end.CancelRequested = cancel
	}
	if end.Also != nil {
		return st, end.Also(tx, st)
	}
	return st, nil
}

// closeSteps is what a deploy's ending does to its step table: the steps
// that never ran become SKIPPED, and a step still RUNNING — its worker
// crashed in it and the deploy was given up, or it waited between two
// attempts (keeping its last attempt's error) — becomes ERROR, so no step
// is left RUNNING.
func (s *Store) closeSteps(ctx context.Context, tx *sql.Tx, id string, at time.Time, state manent.State) error {
	if _, err := tx.ExecContext(ctx, s.q(`UPDATE manent_steps SET state = ? WHERE deployment_id = ? AND state = ?`),
		string(manent.StepSkipped), id, string(manent.StepPending)); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, s.q(`UPDATE manent_steps SET state = ?, finished_at = ?, next_attempt_at = NULL,
		error = CASE WHEN error = '' THEN ? ELSE error END WHERE deployment_id = ? AND state = ?`),
		string(manent.StepError), fmtTime(at), "interrupted: the deploy ended "+string(state)+" while this step ran",
		id, string(manent.StepRunning))
	return err
}

const stepColumns = `name, state, attempts, started_at, finished_at, output, error, next_attempt_at, max_attempts`

func scanStep(row interface{ Scan(...any) error }) (manent.Step, error) {
	var st manent.Step
	var started, finished, output, next sql.NullString
	if err := row.Scan(&st.Name, &st.State, &st.Attempts, &started, &finished, &output, &st.Error, &next, &st.MaxAttempts); err != nil {
		return st, err
	}
	st.StartedAt = parseTime(started)
	st.FinishedAt = parseTime(finished)
	// Only a step between attempts shows them: a row an earlier
	// release's worker wrote (it clears neither) keeps them past its end.
	if st.State == manent.StepRunning {
		st.NextAttemptAt = parseTime(next)
	}
	if st.NextAttemptAt == nil {
		st.MaxAttempts = 0
	}
	if output.Valid && output.String != "" {
		st.Output = json.RawMessage(output.String)
	}
	return st, nil
}

func (s *Store) step(ctx context.Context, q querier, id, name string) (manent.Step, error) {
	return scanStep(q.QueryRowContext(ctx, s.q(`SELECT `+stepColumns+` FROM manent_steps WHERE deployment_id = ? AND name = ?`), id, name))
}

// Step returns one recorded step.
func (s *Store) Step(ctx context.Context, id, name string) (manent.Step, error) {
	st, err := s.step(ctx, s.db, id, name)
	if err == sql.ErrNoRows {
		return st, ErrNotFound
	}
	return st, err
}

const stepsQuery = `SELECT ` + stepColumns + ` FROM manent_steps WHERE deployment_id = ? ORDER BY position, name`

// Steps returns a deploy's steps in plan order.
func (s *Store) Steps(ctx context.Context, id string) ([]manent.Step, error) {
	rows, err := s.rdb.QueryContext(ctx, s.q(stepsQuery), id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []manent.Step{}
	for rows.Next() {
		st, err := scanStep(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// StepsOf returns the steps of several deploys in one query (a page of
// the list), each in plan order; a deploy without steps has an empty list.
func (s *Store) StepsOf(ctx context.Context, ids []string) (map[string][]manent.Step, error) {
	out := make(map[string][]manent.Step, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
		out[id] = []manent.Step{}
	}
	rows, err := s.rdb.QueryContext(ctx, s.q(stepsOfQuery(len(ids))), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		st, err := scanStep(scanPrefix{rows, &id})
		if err != nil {
			return nil, err
		}
		out[id] = append(out[id], st)
	}
	return out, rows.Err()
}

func stepsOfQuery(n int) string {
	return `SELECT deployment_id, ` + stepColumns + ` FROM manent_steps WHERE deployment_id IN (?` +
		strings.Repeat(", ?", n-1) + `) ORDER BY deployment_id, position, name`
}

// scanPrefix scans its leading columns into dest and the rest with Scan.
type scanPrefix struct {
	rows interface{ Scan(...any) error }
	dest *string
}

func (p scanPrefix) Scan(dest ...any) error { return p.rows.Scan(append([]any{p.dest}, dest...)...) }

// StepResumed counts one more resumption of a step: the deploy's workflow
// was resumed after its worker stopped, and this is the first step the new
// execution runs — the one the worker stopped in, or the first after a wait
// it stopped in. by names that execution (its worker and DBOS attempt): it
// is counted once, so a call sent again after the connection was lost
// under its commit returns the count without adding to it. It returns how
// many the step has had (0: no such step).
func (s *Store) StepResumed(ctx context.Context, id, name, by string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, s.q(`UPDATE manent_steps SET interrupted = interrupted + 1, resumed_by = ?
		WHERE deployment_id = ? AND name = ? AND resumed_by <> ? RETURNING interrupted`), by, id, name, by).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		// Counted already for by, or not a step of the deploy.
		err = s.db.QueryRowContext(ctx, s.q(`SELECT interrupted FROM manent_steps
			WHERE deployment_id = ? AND name = ? AND resumed_by = ?`), id, name, by).Scan(&n)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil
		}
	}
	return n, err
}
