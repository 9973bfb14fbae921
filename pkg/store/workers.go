package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Worker states (SPEC §11.3).
const (
	WorkerAlive   = "alive"
	WorkerLeaving = "leaving"
	WorkerDead    = "dead"
)

// Worker is one manent-server process as the others see it.
type Worker struct {
	ID         string
	State      string
	LastSeen   time.Time
	StartedAt  time.Time
	Version    string
	AppVersion string
	// TakenOverAt is when a live worker recovered this one's deploys (nil:
	// not taken over); TakenOverBy is that worker.
	TakenOverAt *time.Time
	TakenOverBy string
}

// ErrWorkerDead is returned by Heartbeat when the others declared this
// worker dead: its deploys were taken over and it must not run their steps.
var ErrWorkerDead = errors.New("this worker was declared dead: its deploys were taken over")

// nowMs is the database clock in epoch milliseconds.
func (s *Store) nowMs() string {
	if s.postgres {
		return `(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT`
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`
}

// RegisterWorker records that worker id starts now (alive), replacing what
// an earlier process of the same id left.
func (s *Store) RegisterWorker(ctx context.Context, id, version, appVersion string) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO manent_workers (id, state, last_seen_ms, started_at_ms, version, app_version)
		VALUES (?, 'alive', `+s.nowMs()+`, `+s.nowMs()+`, ?, ?)
		ON CONFLICT (id) DO UPDATE SET state = 'alive', last_seen_ms = excluded.last_seen_ms,
			started_at_ms = excluded.started_at_ms, version = excluded.version, app_version = excluded.app_version,
			taken_over_ms = NULL, taken_over_by = NULL`), id, version, appVersion)
	if err != nil {
		return fmt.Errorf("register worker %s: %w", id, err)
	}
	return nil
}

// Heartbeat records that worker id is still alive. It fails with
// ErrWorkerDead once the others declared it dead (or it left): a worker
// never revives itself; it must stop and start again.
func (s *Store) Heartbeat(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE manent_workers SET last_seen_ms = `+s.nowMs()+`
		WHERE id = ? AND state = 'alive'`), id)
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	} else if n == 0 {
		return ErrWorkerDead
	}
	return nil
}

// LeaveWorker marks worker id leaving: the elected worker takes its deploys
// over at once, without waiting for dead_after.
func (s *Store) LeaveWorker(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE manent_workers SET state = 'leaving', last_seen_ms = `+s.nowMs()+`
		WHERE id = ? AND state = 'alive'`), id)
	if err != nil {
		return fmt.Errorf("mark worker %s leaving: %w", id, err)
	}
	return nil
}

// DeclareDead marks dead the workers silent for more than deadAfter (by
// the database's clock) and returns them with the leaving workers not yet
// taken over: the workers whose deploys must be taken over now. The
// update is conditional, so a worker whose heartbeat lands first stays
// alive, and one declared dead never beats again (Heartbeat).
func (s *Store) DeclareDead(ctx context.Context, deadAfter time.Duration) ([]string, error) {
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE manent_workers SET state = 'dead'
		WHERE state = 'alive' AND last_seen_ms < `+s.nowMs()+` - ?`), deadAfter.Milliseconds()); err != nil {
		return nil, fmt.Errorf("declare silent workers dead: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM manent_workers
		WHERE state IN ('dead', 'leaving') AND taken_over_ms IS NULL ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list workers to take over: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// TakeOver takes worker id's deploys over when it is dead or leaving and
// nobody took them over yet: recover runs (DBOS recovery of its executor)
// while the worker's row is locked, so a process of that worker starting
// again (RegisterWorker) waits until its deploys are handed over and then
// recovers only what is still its own. by is the worker taking over.
// It reports whether recover ran.
func (s *Store) TakeOver(ctx context.Context, id, by string, recover func() error) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("take over %s: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit: no-op
	lock := ""
	if s.postgres {
		lock = " FOR UPDATE"
	}
	var state string
	var over sql.NullInt64
	err = tx.QueryRowContext(ctx, s.q(`SELECT state, taken_over_ms FROM manent_workers WHERE id = ?`+lock), id).Scan(&state, &over)
	if err != nil {
		return false, fmt.Errorf("take over %s: %w", id, err)
	}
	if state == WorkerAlive || over.Valid {
		return false, nil
	}
	if err := recover(); err != nil {
		return false, fmt.Errorf("take over %s: %w", id, err)
	}
	if _, err := tx.ExecContext(ctx, s.q(`UPDATE manent_workers SET state = 'dead', taken_over_ms = `+s.nowMs()+`, taken_over_by = ?
		WHERE id = ?`), by, id); err != nil {
		return false, fmt.Errorf("record takeover of %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("record takeover of %s: %w", id, err)
	}
	return true, nil
}

// Workers lists every worker that ever registered, by id.
func (s *Store) Workers(ctx context.Context) ([]Worker, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, state, last_seen_ms, started_at_ms, version, app_version, taken_over_ms, taken_over_by
		FROM manent_workers ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	defer rows.Close()
	var out []Worker
	for rows.Next() {
		var w Worker
		var seen, started int64
		var over sql.NullInt64
		var by sql.NullString
		if err := rows.Scan(&w.ID, &w.State, &seen, &started, &w.Version, &w.AppVersion, &over, &by); err != nil {
			return nil, err
		}
		w.LastSeen, w.StartedAt = time.UnixMilli(seen).UTC(), time.UnixMilli(started).UTC()
		if over.Valid {
			t := time.UnixMilli(over.Int64).UTC()
			w.TakenOverAt = &t
		}
		w.TakenOverBy = by.String
		out = append(out, w)
	}
	return out, rows.Err()
}
