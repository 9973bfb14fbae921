package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// Schedule is a recurring deploy (SCHEDULED).
type Schedule struct {
	ID              string
	Application     string
	Environment     string
	Cron            string
	State           string // SCHEDULED or DELETED
	Descriptor      []byte
	Requester       string
	RequesterGroups []string
	CreatedAt       time.Time
	DeletedAt       *time.Time
	LastTick        *time.Time
	LastDeploy      string
	LastError       string
}

const scheduleColumns = `id, application, environment, cron, descriptor, requester, requester_groups, created_at, deleted_at, last_tick, last_deploy, last_error`

func scanSchedule(row interface{ Scan(...any) error }) (*Schedule, error) {
	var s Schedule
	var desc, groups, created string
	var deleted, tick sql.NullString
	err := row.Scan(&s.ID, &s.Application, &s.Environment, &s.Cron, &desc, &s.Requester, &groups, &created, &deleted, &tick, &s.LastDeploy, &s.LastError)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	s.Descriptor = []byte(desc)
	if err := json.Unmarshal([]byte(groups), &s.RequesterGroups); err != nil {
		return nil, fmt.Errorf("schedule %s: requester groups: %w", s.ID, err)
	}
	if t := parseTime(sql.NullString{String: created, Valid: true}); t != nil {
		s.CreatedAt = *t
	}
	s.DeletedAt, s.LastTick = parseTime(deleted), parseTime(tick)
	s.State = string(manent.StateScheduled)
	if s.DeletedAt != nil {
		s.State = "DELETED"
	}
	return &s, nil
}

// InsertSchedule records a new schedule, and runs also in its transaction
// (the server records the request's Idempotency-Key and audit entry there).
func (s *Store) InsertSchedule(ctx context.Context, sc *Schedule, most int, also ...func(*sql.Tx) error) error {
	groups, _ := json.Marshal(sc.RequesterGroups)
	if most <= 0 {
		most = math.MaxInt32
	}
	return s.Tx(ctx, func(tx *sql.Tx) error {
		// Only while its application/environment has fewer than most: the
		// count and the insert are one statement.
		res, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_schedules (id, application, environment, cron, descriptor, requester, requester_groups, created_at)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?
		WHERE (`+countActiveSchedules+`) < ?`),
			sc.ID, sc.Application, sc.Environment, sc.Cron, string(sc.Descriptor), sc.Requester, string(groups), fmtTime(sc.CreatedAt),
			sc.Application, sc.Environment, most)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return ErrScheduleLimit
		}
		// What must not outlive a schedule that is not there (its
		// Idempotency-Key, its audit entry) commits with it.
		for _, fn := range also {
			if err := fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
}

// ErrScheduleLimit: the application/environment has as many schedules as
// it may (InsertSchedule).
var ErrScheduleLimit = errors.New("too many schedules")

// countActiveSchedules counts an application/environment's schedules that
// are not deleted: the bound InsertSchedule enforces, and ActiveSchedules.
const countActiveSchedules = `SELECT COUNT(*) FROM manent_schedules WHERE application = ? AND environment = ? AND deleted_at IS NULL`

// ActiveSchedules counts the schedules of an application/environment that
// are not deleted.
func (s *Store) ActiveSchedules(ctx context.Context, app, env string) (int, error) {
	var n int
	err := s.rdb.QueryRowContext(ctx, s.q(countActiveSchedules), app, env).Scan(&n)
	return n, err
}

// ActiveSchedulesOf returns the schedules of an application/environment
// that are not deleted, oldest first: read by tx when it is not nil (in
// the transaction that records a schedule), else by the read pool.
func (s *Store) ActiveSchedulesOf(ctx context.Context, tx *sql.Tx, app, env string) ([]Schedule, error) {
	query := s.q(`SELECT ` + scheduleColumns + ` FROM manent_schedules WHERE application = ? AND environment = ? AND deleted_at IS NULL ORDER BY created_at, id`)
	var (
		rows *sql.Rows
		err  error
	)
	if tx != nil {
		rows, err = tx.QueryContext(ctx, query, app, env)
	} else {
		rows, err = s.rdb.QueryContext(ctx, query, app, env)
	}
	return scanSchedules(rows, err)
}

// scanSchedules reads the schedules of a query's rows (err: the query's).
func scanSchedules(rows *sql.Rows, err error) ([]Schedule, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Schedule{}
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *sc)
	}
	return out, rows.Err()
}

// GetSchedule returns one schedule.
func (s *Store) GetSchedule(ctx context.Context, id string) (*Schedule, error) {
	return scanSchedule(s.rdb.QueryRowContext(ctx, s.q(`SELECT `+scheduleColumns+` FROM manent_schedules WHERE id = ?`), id))
}

// Schedules returns the schedules not deleted, newest first.
func (s *Store) Schedules(ctx context.Context) ([]Schedule, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+scheduleColumns+` FROM manent_schedules WHERE deleted_at IS NULL ORDER BY created_at DESC, id DESC`)
	return scanSchedules(rows, err)
}

// DeleteSchedule marks a schedule deleted, and runs also in its
// transaction (the engine removes its DBOS registration there, the server
// appends its audit entry); false, with nothing written, when it already
// was deleted or never existed.
func (s *Store) DeleteSchedule(ctx context.Context, id string, also ...func(*sql.Tx) error) (bool, error) {
	err := s.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE manent_schedules SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL`), fmtTime(time.Now()), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errNoSchedule
		}
		for _, fn := range also {
			if err := fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errNoSchedule) {
		return false, nil
	}
	return err == nil, err
}

// errNoSchedule rolls back DeleteSchedule's transaction: there is no live
// schedule of that id.
var errNoSchedule = errors.New("no live schedule")

// WhileScheduleLive runs fn in a transaction that holds schedule id's row,
// when the schedule exists and is not deleted; false, with fn not run,
// otherwise. A deletion of the schedule commits before it or after it,
// never in between.
func (s *Store) WhileScheduleLive(ctx context.Context, id string, fn func(*sql.Tx) error) (bool, error) {
	err := s.Tx(ctx, func(tx *sql.Tx) error {
		// An update of nothing, to hold the row (PostgreSQL): a
		// concurrent DeleteSchedule waits for this transaction, or this
		// one for it and then finds the row deleted.
		res, err := tx.ExecContext(ctx, s.q(`UPDATE manent_schedules SET id = id WHERE id = ? AND deleted_at IS NULL`), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errNoSchedule
		}
		return fn(tx)
	})
	if errors.Is(err, errNoSchedule) {
		return false, nil
	}
	return err == nil, err
}

// ErrScheduleDeleted: the schedule was deleted (ScheduleTickedTx).
var ErrScheduleDeleted = errors.New("the schedule was deleted")

// ScheduleTickedTx records in tx, the transaction that submits it, the
// deploy of schedule id's tick at, as ScheduleTicked does, while the
// schedule is live: it holds the schedule's row until tx ends, so a
// deletion commits before (then ErrScheduleDeleted, nothing written: the
// submit rolls back) or after the tick's deploy, never in between.
func (s *Store) ScheduleTickedTx(ctx context.Context, tx *sql.Tx, id string, at time.Time, deploy string) error {
	res, err := tx.ExecContext(ctx, s.q(`UPDATE manent_schedules SET id = id WHERE id = ? AND deleted_at IS NULL`), id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return ErrScheduleDeleted
	}
	t := fmtTime(at)
	_, err = tx.ExecContext(ctx, s.q(`UPDATE manent_schedules SET last_tick = ?, last_deploy = ?, last_error = ''
		WHERE id = ? AND COALESCE(last_tick, '') <= ?`), t, deploy, id, t)
	return err
}

// ScheduleTicked records a tick's outcome, unless a later tick's is
// recorded already: the outcome of a tick recorded late (by a slower
// worker, or a tick run again) never moves the schedule's last tick back.
// The same tick's outcome is recorded again. last_tick is text of the
// fixed-width timeFormat on both databases, so the text order is the
// time order.
func (s *Store) ScheduleTicked(ctx context.Context, id string, at time.Time, deploy, errText string) error {
	t := fmtTime(at)
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE manent_schedules SET last_tick = ?, last_deploy = ?, last_error = ?
		WHERE id = ? AND COALESCE(last_tick, '') <= ?`),
		t, deploy, errText, id, t)
	return err
}
