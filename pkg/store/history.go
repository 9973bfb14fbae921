package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// History, rollback and DORA (SPEC §11.5).

const releaseBeforeQuery = `SELECT ` + deploymentColumns + ` FROM manent_deployments
	WHERE application = ? AND environment = ? AND state = 'SUCCESS' AND id <> ? AND version <> ? AND finished_at <= ?
	ORDER BY finished_at DESC, id DESC LIMIT 1`

// ReleaseBefore returns the deploy of the release that was current before
// cur in application/environment: the latest SUCCESS that finished before
// cur with another version (deploying the same version again is not a
// release to go back to). nil when there is none.
func (s *Store) ReleaseBefore(ctx context.Context, application, environment string, cur manent.Release) (*Record, error) {
	at := ""
	if cur.FinishedAt != nil {
		at = fmtTime(*cur.FinishedAt)
	} else {
		at = fmtTime(time.Now())
	}
	return s.oneOrNil(ctx, releaseBeforeQuery, application, environment, cur.DeploymentID, cur.Version, at)
}

const latestSuccessQuery = `SELECT ` + deploymentColumns + ` FROM manent_deployments
	WHERE application = ? AND environment = ? AND state = 'SUCCESS' AND version = ?
	ORDER BY finished_at DESC, id DESC LIMIT 1`

// LatestSuccess returns the latest SUCCESS deploy of version in
// application/environment, nil when there is none.
func (s *Store) LatestSuccess(ctx context.Context, application, environment, version string) (*Record, error) {
	return s.oneOrNil(ctx, latestSuccessQuery, application, environment, version)
}

const latestOfVersionQuery = `SELECT ` + deploymentColumns + ` FROM manent_deployments
	WHERE application = ? AND version = ? AND environment = ?
	ORDER BY created_at DESC, id DESC LIMIT 1`

// LatestOfVersion returns the latest deploy of version in
// application/environment, whatever its state, nil when there is none: what
// a promotion refusal says of an environment where the version has not
// succeeded.
func (s *Store) LatestOfVersion(ctx context.Context, application, environment, version string) (*Record, error) {
	return s.oneOrNil(ctx, latestOfVersionQuery, application, version, environment)
}

func (s *Store) oneOrNil(ctx context.Context, query string, args ...any) (*Record, error) {
	r, err := scanRecord(s.rdb.QueryRowContext(ctx, s.q(query), args...))
	if err == ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return r, nil
}

// Finished is a final deploy that ran, as DORA counts it (a CANCELLED one
// may have: DORA reads its steps).
type Finished struct {
	ID          string
	Application string
	Environment string
	State       manent.State
	FinishedAt  time.Time
	// CommittedAt is the descriptor's source.committed_at (nil without one).
	CommittedAt *time.Time
	// Rollback is the deploy's rollback outcome ("completed", "failed", "").
	Rollback string
	// RestoredAt is, for a deploy that did not succeed, the end of the
	// next SUCCESS of its application/environment (nil: none yet),
	// recorded when that SUCCESS finished.
	RestoredAt *time.Time
	// Steps are the step rows of a deploy that did not end SUCCESS, which
	// tell whether it reached the environment: FinishedSince reads their
	// name, state and start only, and leaves a SUCCESS's nil.
	Steps []manent.Step
}

// doraStates are the final states of deploys that ran (SPEC §11.5), and
// CANCELLED: a deploy cancelled after its activation changed what runs.
var doraStates = []manent.State{manent.StateSuccess, manent.StateError, manent.StateMaxRecoveryAttemptsExceeded, manent.StateCancelled}

// FinishedSince calls fn with each deploy that ended SUCCESS, ERROR,
// MAX_RECOVERY_ATTEMPTS_EXCEEDED or CANCELLED at or after since, oldest
// first, in application and environment (each "" for all), with the steps
// of those that did not succeed; an error of fn stops the read and is
// returned. It reads one query and holds one deploy at a time, however
// long the window: a Finished's Steps are fn's only until fn returns (the
// next deploy's reuse them).
func (s *Store) FinishedSince(ctx context.Context, application, environment string, since time.Time, fn func(Finished) error) error {
	query, args := finishedSinceQuery(application, environment, since)
	rows, err := s.rdb.QueryContext(ctx, s.q(query), s.planned(args)...)
	if err != nil {
		return fmt.Errorf("dora: %w", err)
	}
	defer rows.Close()
	var (
		cur                        Finished
		steps                      []manent.Step
		id, app, env, state, fin   sql.RawBytes
		rollback                   sql.RawBytes
		committed, restored        sql.NullString
		stepName, stepState, start sql.NullString
	)
	for rows.Next() {
		if err := rows.Scan(&id, &app, &env, &state, &fin, &committed, &rollback, &restored, &stepName, &stepState, &start); err != nil {
			return fmt.Errorf("dora: %w", err)
		}
		// A deploy's rows are adjacent: the query orders by its
		// finish and id, and joins its steps.
		if cur.ID != string(id) {
			if cur.ID != "" {
				cur.Steps = steps
				if err := fn(cur); err != nil {
					return err
				}
			}
			steps = steps[:0]
			cur = Finished{ID: string(id), Application: string(app), Environment: string(env), State: manent.State(state),
				Rollback: string(rollback), CommittedAt: parseTime(committed), RestoredAt: parseTime(restored)}
			if t := parseTime(sql.NullString{String: string(fin), Valid: true}); t != nil {
				cur.FinishedAt = *t
			}
		}
		if stepName.Valid {
			steps = append(steps, manent.Step{Name: stepName.String, State: manent.StepState(stepState.String), StartedAt: parseTime(start)})
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dora: %w", err)
	}
	if cur.ID != "" {
		cur.Steps = steps
		return fn(cur)
	}
	return nil
}

// finishedSinceQuery is FinishedSince's query: by finish time, narrowed by
// application/environment (indexes manent_deployments_finished and
// manent_deployments_appenv_finished; the EXPLAIN test), each deploy that
// did not succeed joined with its steps (the primary key of manent_steps).
// Ordered by finish and id, a deploy's rows come together. A SUCCESS joins
// on NULL, which finds no step without reading its steps: a condition on
// d.state beside the join's key was checked on each of them (the SUCCESS
// deploys' steps were read: BenchmarkDORA took about 15% more CPU).
func finishedSinceQuery(application, environment string, since time.Time) (string, []any) {
	ph := make([]string, len(doraStates))
	args := []any{}
	for i, st := range doraStates {
		ph[i] = "?"
		args = append(args, string(st))
	}
	where := []string{"d.state IN (" + strings.Join(ph, ",") + ")", "d.finished_at >= ?"}
	args = append(args, fmtTime(since))
	if application != "" {
		where = append(where, "d.application = ?")
		args = append(args, application)
	}
	if environment != "" {
		where = append(where, "d.environment = ?")
		args = append(args, environment)
	}
	return `SELECT d.id, d.application, d.environment, d.state, d.finished_at, d.committed_at, d.rollback, d.restored_at,
		s.name, s.state, s.started_at
		FROM manent_deployments d LEFT JOIN manent_steps s ON s.deployment_id = CASE WHEN d.state <> 'SUCCESS' THEN d.id END
		WHERE ` + strings.Join(where, " AND ") + ` ORDER BY d.finished_at, d.id`, args
}

// InFlight is a deploy queued or running on an environment.
type InFlight struct {
	ID      string
	Version string
	State   manent.State
}

// InFlightTx returns a deploy of application/environment that is ENQUEUED
// or PENDING other than except, in tx, or nil. Run after a lock every
// submission takes (the audit chain's head on PostgreSQL; SQLite has one
// writer), it sees a concurrent submission that committed first.
func (s *Store) InFlightTx(ctx context.Context, tx *sql.Tx, application, environment, except string) (*InFlight, error) {
	return s.firstTx(ctx, tx, `state IN (?, ?)`, application, environment, except, string(manent.StateEnqueued), string(manent.StatePending))
}

// WaitingRollbackTx returns a rollback of application/environment that
// goes back from deploy rollbackOf and waits for its approval or change
// ticket (AWAITING_APPROVAL), other than except, in tx, or nil: a second
// rollback of the same release is a repeat (a double click), not a
// second one to queue. Run after the lock InFlightTx is.
func (s *Store) WaitingRollbackTx(ctx context.Context, tx *sql.Tx, application, environment, rollbackOf, except string) (*InFlight, error) {
	return s.firstTx(ctx, tx, `state = ? AND rollback_of = ?`, application, environment, except, string(manent.StateAwaitingApproval), rollbackOf)
}

// firstTx returns the first deploy created of application/environment,
// other than except, that also matches cond with args, in tx, or nil.
func (s *Store) firstTx(ctx context.Context, tx *sql.Tx, cond, application, environment, except string, args ...any) (*InFlight, error) {
	var f InFlight
	var state string
	err := tx.QueryRowContext(ctx, s.q(`SELECT id, version, state FROM manent_deployments
		WHERE application = ? AND environment = ? AND `+cond+` AND id <> ? ORDER BY created_at LIMIT 1`),
		append(append([]any{application, environment}, args...), except)...).Scan(&f.ID, &f.Version, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f.State = manent.State(state)
	return &f, nil
}
