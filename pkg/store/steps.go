package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// PlanSteps records the planned steps of a deploy as PENDING rows, so the
// step table shows the whole plan from the start.
func (s *Store) PlanSteps(ctx context.Context, tx *sql.Tx, id string, names []string) error {
	for i, n := range names {
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_steps (deployment_id, position, name, state) VALUES (?, ?, ?, ?)
			ON CONFLICT (deployment_id, name) DO NOTHING`), id, (i+1)*10, n, string(manent.StepPending)); err != nil {
			return err
		}
	}
	return nil
}

// StepStarted marks a step RUNNING and counts one more attempt. A step not
// in the plan (rollback, checkpoint…) is appended after the last one.
func (s *Store) StepStarted(ctx context.Context, id, name string) (manent.Step, error) {
	var st manent.Step
	err := s.Tx(ctx, func(tx *sql.Tx) error {
		now := time.Now()
		res, err := tx.ExecContext(ctx, s.q(`UPDATE manent_steps SET state = ?, attempts = attempts + 1,
			started_at = COALESCE(started_at, ?), finished_at = NULL, error = '' WHERE deployment_id = ? AND name = ?`),
			string(manent.StepRunning), fmtTime(now), id, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_steps (deployment_id, position, name, state, attempts, started_at)
				SELECT ?, COALESCE(MAX(position), 0) + 10, ?, ?, 1, ? FROM manent_steps WHERE deployment_id = ?`),
				id, name, string(manent.StepRunning), fmtTime(now), id); err != nil {
				return err
			}
		}
		st, err = s.step(ctx, tx, id, name)
		if err != nil {
			return err
		}
		_, err = s.appendEvent(ctx, tx, id, EventStep, now, st)
		return err
	})
	return st, err
}

// StepFinished records a step's end: SUCCESS with its output, or ERROR with
// its error (another attempt may follow), or SKIPPED.
func (s *Store) StepFinished(ctx context.Context, id, name string, state manent.StepState, output any, errText string) (manent.Step, error) {
	var st manent.Step
	err := s.Tx(ctx, func(tx *sql.Tx) error {
		now := time.Now()
		var out any
		if output != nil {
			b, err := json.Marshal(output)
			if err != nil {
				return err
			}
			out = string(b)
		}
		res, err := tx.ExecContext(ctx, s.q(`UPDATE manent_steps SET state = ?, finished_at = ?, output = ?, error = ? WHERE deployment_id = ? AND name = ?`),
			string(state), fmtTime(now), out, errText, id, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_steps (deployment_id, position, name, state, finished_at, output, error)
				SELECT ?, COALESCE(MAX(position), 0) + 10, ?, ?, ?, ?, ? FROM manent_steps WHERE deployment_id = ?`),
				id, name, string(state), fmtTime(now), out, errText, id); err != nil {
				return err
			}
		}
		st, err = s.step(ctx, tx, id, name)
		if err != nil {
			return err
		}
		_, err = s.appendEvent(ctx, tx, id, EventStep, now, st)
		return err
	})
	return st, err
}

// SkipPending marks every step still PENDING as SKIPPED (a deploy that ended early).
func (s *Store) SkipPending(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE manent_steps SET state = ? WHERE deployment_id = ? AND state = ?`),
		string(manent.StepSkipped), id, string(manent.StepPending))
	return err
}

const stepColumns = `name, state, attempts, started_at, finished_at, output, error`

func scanStep(row interface{ Scan(...any) error }) (manent.Step, error) {
	var st manent.Step
	var started, finished, output sql.NullString
	if err := row.Scan(&st.Name, &st.State, &st.Attempts, &started, &finished, &output, &st.Error); err != nil {
		return st, err
	}
	st.StartedAt = parseTime(started)
	st.FinishedAt = parseTime(finished)
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

// Steps returns a deploy's steps in plan order.
func (s *Store) Steps(ctx context.Context, id string) ([]manent.Step, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+stepColumns+` FROM manent_steps WHERE deployment_id = ? ORDER BY position, name`), id)
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
