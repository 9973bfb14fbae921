package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// finalStates is the SQL list of final states.
func finalStates() string { return statesSQL(true) }

// RetentionMark is a final deploy as retention.workflows goes through
// them: oldest finished first, then by id.
type RetentionMark struct {
	ID         string
	FinishedAt string // as stored: fixed-width text that sorts as time
}

// WorkflowsToDelete returns up to limit final deploys, oldest finished
// first, that finished before `before` and whose DBOS workflows are kept,
// after `from` in that order (the zero RetentionMark: from the first) — past
// those a caller left (a delivery still retrying), however many.
func (s *Store) WorkflowsToDelete(ctx context.Context, before time.Time, limit int, from RetentionMark) ([]RetentionMark, error) {
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT id, finished_at FROM manent_deployments
		WHERE finished_at < ? AND workflows_deleted_at IS NULL AND state IN (`+finalStates()+`)
		AND (finished_at > ? OR (finished_at = ? AND id > ?))
		ORDER BY finished_at, id LIMIT ?`), fmtTime(before), from.FinishedAt, from.FinishedAt, from.ID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []RetentionMark
	for rows.Next() {
		var f RetentionMark
		if err := rows.Scan(&f.ID, &f.FinishedAt); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// KeepDeliveries keeps a final deploy's deliveries (JSON, as status shows
// them) in manent's tables before its DBOS workflows are deleted; a second
// call keeps the first.
func (s *Store) KeepDeliveries(ctx context.Context, id string, deliveries []byte) error {
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE manent_deployments SET deliveries = ? WHERE id = ? AND deliveries IS NULL`),
		string(deliveries), id)
	if err != nil {
		return fmt.Errorf("keep the deliveries of %s: %w", id, err)
	}
	return nil
}

// WorkflowsDeleted records that a final deploy's DBOS workflows are gone.
func (s *Store) WorkflowsDeleted(ctx context.Context, id string, at time.Time) error {
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE manent_deployments SET workflows_deleted_at = ? WHERE id = ?`), fmtTime(at), id)
	if err != nil {
		return fmt.Errorf("record deleted workflows of %s: %w", id, err)
	}
	return nil
}

// SavedDeliveries returns the deliveries kept by KeepDeliveries; ok is
// false while none were kept (DBOS still holds them).
func (s *Store) SavedDeliveries(ctx context.Context, id string) (deliveries []byte, ok bool, err error) {
	var d sql.NullString
	err = s.rdb.QueryRowContext(ctx, s.q(`SELECT deliveries FROM manent_deployments WHERE id = ?`), id).Scan(&d)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, ErrNotFound
	}
	if err != nil || !d.Valid {
		return nil, false, err
	}
	return []byte(d.String), true, nil
}

// pruneChunk bounds the log lines one transaction of retention removes:
// SQLite has one writer, and submissions, step records and heartbeats
// wait while a transaction holds it.
var pruneChunk = 2000

// PruneLogs removes the log lines of up to limit final deploys that
// finished before `before` (their other events stay: state, steps, the
// outcome). It returns how many deploys it pruned.
//
// Each deploy is marked first (logs_removed_from: it then reads as a
// deploy whose log retention removed), then its lines go in transactions
// of at most pruneChunk rows, then logs_pruned_at says they are all gone.
// A crash in between leaves it marked, and the next run goes on with it.
func (s *Store) PruneLogs(ctx context.Context, before time.Time, limit int) (int, error) {
	ids, err := s.ids(ctx, `SELECT id FROM manent_deployments
		WHERE finished_at < ? AND logs_pruned_at IS NULL AND state IN (`+finalStates()+`)
		ORDER BY finished_at LIMIT ?`, fmtTime(before), limit)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	in, args := placeholders(ids)
	now := fmtTime(time.Now())
	if err := s.Tx(ctx, func(tx *sql.Tx) error { return s.markLogsRemovedTx(ctx, tx, ids, now) }); err != nil {
		return 0, fmt.Errorf("prune logs: %w", err)
	}
	if err := s.removeLogs(ctx, ids); err != nil {
		return 0, fmt.Errorf("prune logs: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE manent_deployments SET logs_pruned_at = ? WHERE id IN (`+in+`)`), append([]any{now}, args...)...); err != nil {
		return 0, fmt.Errorf("prune logs: %w", err)
	}
	return len(ids), nil
}

// markLogsRemovedTx marks ids as deploys whose log lines retention
// removes from now on (kept from an earlier mark).
func (s *Store) markLogsRemovedTx(ctx context.Context, tx *sql.Tx, ids []string, now string) error {
	in, args := placeholders(ids)
	_, err := tx.ExecContext(ctx, s.q(`UPDATE manent_deployments SET logs_removed_from = ? WHERE id IN (`+in+`) AND logs_removed_from IS NULL`),
		append([]any{now}, args...)...)
	if err != nil {
		return fmt.Errorf("mark the deploys whose log lines go: %w", err)
	}
	return nil
}

// removeLogs removes the log lines of ids, marked first
// (markLogsRemovedTx), in transactions of at most pruneChunk rows: a
// deploy's events are taken in order of seq, pruneChunk at a time, so
// that no transaction reads again what an earlier one removed.
func (s *Store) removeLogs(ctx context.Context, ids []string) error {
	bound := s.q(`SELECT seq FROM manent_events WHERE deployment_id = ? AND seq > ? ORDER BY seq LIMIT 1 OFFSET ?`)
	upTo := s.q(`DELETE FROM manent_events WHERE deployment_id = ? AND type = ? AND seq > ? AND seq <= ?`)
	rest := s.q(`DELETE FROM manent_events WHERE deployment_id = ? AND type = ? AND seq > ?`)
	for _, id := range ids {
		for after, done := int64(0), false; !done; {
			err := s.Tx(ctx, func(tx *sql.Tx) error {
				var last int64
				err := tx.QueryRowContext(ctx, bound, id, after, pruneChunk-1).Scan(&last)
				if errors.Is(err, sql.ErrNoRows) {
					done = true
					_, err = tx.ExecContext(ctx, rest, id, EventLog, after)
					return err
				}
				if err != nil {
					return err
				}
				_, err = tx.ExecContext(ctx, upTo, id, EventLog, after, last)
				after = last
				return err
			})
			if err != nil {
				return fmt.Errorf("remove the log lines of %s: %w", id, err)
			}
		}
	}
	return nil
}

// LogsRemovedFrom returns when retention began removing the log lines of
// deploy id (retention.logs, or retention.deploys on its way to remove
// it), or nil while its log is whole.
func (s *Store) LogsRemovedFrom(ctx context.Context, id string) (*time.Time, error) {
	var at sql.NullString
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT logs_removed_from FROM manent_deployments WHERE id = ?`), id).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read whether the log of %s was removed: %w", id, err)
	}
	return parseTime(at), nil
}

// PruneDeploys removes up to limit final deploys that finished before
// `before` and whose DBOS workflows are already deleted, with their steps,
// events and approvals — except those something still needs (stillNeeded).
// The audit log is not touched: its chain still verifies. It returns how
// many it removed.
//
// What is still needed is read twice: once to choose the batch, and again
// inside the transaction that deletes it, after the batch's rows are locked
// (PostgreSQL; SQLite's write transactions run one at a time). A deploy
// submitted in between that comes after one of them, or needs one for its
// promotion, is seen there and keeps it; a submission that locks its
// references first (engine.Submit, LockReferencesTx) makes this wait for
// its commit.
//
// Log lines are most of a deploy's rows (200,000 for 100 deploys of 2,000
// lines), and one transaction removing them held SQLite's only writer
// for over a second. So the batch goes in three parts: a transaction
// that locks the batch, reads what is still needed and marks the others
// (logs_removed_from: each then reads as a deploy whose log retention
// removed); their log lines, in transactions of at most pruneChunk rows;
// and one that locks the marked ones, reads what is still needed again
// and deletes those that are not, with their steps and other events. A
// crash leaves each deploy whole, marked with its log partly gone, or
// gone, never its row without its steps; the next run goes on. One that
// became needed between the first and last part (a deploy submitted
// meanwhile comes after it) is kept, its log removed.
func (s *Store) PruneDeploys(ctx context.Context, before time.Time, limit int) (int, error) {
	keep, err := s.stillNeeded(ctx, s.rdb)
	if err != nil {
		return 0, err
	}
	all, err := s.ids(ctx, `SELECT id FROM manent_deployments
		WHERE finished_at < ? AND workflows_deleted_at IS NOT NULL AND state IN (`+finalStates()+`)
		ORDER BY finished_at LIMIT ?`, fmtTime(before), limit+len(keep))
	if err != nil {
		return 0, err
	}
	var ids []string
	for _, id := range all {
		if !keep[id] && len(ids) < limit {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if s.beforePrune != nil {
		s.beforePrune(ids)
	}
	// lockFree locks ids (PostgreSQL; SQLite's write transactions run one
	// at a time) and returns those still there and not needed.
	lockFree := func(tx *sql.Tx, ids []string) ([]string, error) {
		if s.postgres {
			in, args := placeholders(ids)
			// In id order, as LockReferencesTx does: no deadlock.
			locked, err := queryIDs(ctx, tx, s.q(`SELECT id FROM manent_deployments WHERE id IN (`+in+`) ORDER BY id FOR UPDATE`), args...)
			if err != nil {
				return nil, fmt.Errorf("lock: %w", err)
			}
			ids = locked // another worker's retention may have removed some
		}
		keep, err := s.stillNeeded(ctx, tx)
		if err != nil {
			return nil, err
		}
		var free []string
		for _, id := range ids {
			if !keep[id] {
				free = append(free, id)
			}
		}
		return free, nil
	}
	var marked []string
	err = s.Tx(ctx, func(tx *sql.Tx) error {
		var err error
		if marked, err = lockFree(tx, ids); err != nil || len(marked) == 0 {
			return err
		}
		return s.markLogsRemovedTx(ctx, tx, marked, fmtTime(time.Now()))
	})
	if err != nil {
		return 0, fmt.Errorf("prune %d deploys (%s…): %w", len(ids), ids[0], err)
	}
	if len(marked) == 0 {
		return 0, nil
	}
	if err := s.removeLogs(ctx, marked); err != nil {
		return 0, fmt.Errorf("prune %d deploys: %w", len(marked), err)
	}
	n := 0
	err = s.Tx(ctx, func(tx *sql.Tx) error {
		n = 0
		gone, err := lockFree(tx, marked)
		if err != nil || len(gone) == 0 {
			return err
		}
		in, args := placeholders(gone)
		if err := s.markPrunedTx(ctx, tx, in, args); err != nil {
			return err
		}
		// The children are removed explicitly: PostgreSQL and SQLite
		// cascade, but an older database may lack a constraint.
		for _, table := range []string{"manent_steps", "manent_events", "manent_approvals", "manent_wave_approvals"} {
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM `+table+` WHERE deployment_id IN (`+in+`)`), args...); err != nil {
				return fmt.Errorf("%s: %w", table, err)
			}
		}
		res, err := tx.ExecContext(ctx, s.q(`DELETE FROM manent_deployments WHERE id IN (`+in+`)`), args...)
		if err != nil {
			return err
		}
		removed, err := res.RowsAffected()
		n = int(removed)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune %d deploys (%s…): %w", len(marked), marked[0], err)
	}
	return n, nil
}

// LockReferencesTx is what a submission does in the transaction that
// inserts its deploy, before it: it locks the deploys the new one will need
// (`after`: those it comes after and the successes promotion was judged
// on; and every success of its application's version) so that
// retention.deploys waits for the commit and then sees the new deploy, and
// returns those of `after` that no longer exist (removed by
// retention.deploys since they were checked).
func (s *Store) LockReferencesTx(ctx context.Context, tx *sql.Tx, after []string, application, version string) (missing []string, err error) {
	lock := ""
	if s.postgres {
		lock = " ORDER BY id FOR KEY SHARE"
	}
	args := []any{application, version}
	cond := `(application = ? AND version = ? AND state = 'SUCCESS')`
	if len(after) > 0 {
		in, a := placeholders(after)
		cond += ` OR id IN (` + in + `)`
		args = append(args, a...)
	}
	found, err := queryIDs(ctx, tx, s.q(`SELECT id FROM manent_deployments WHERE `+cond+lock), args...)
	if err != nil {
		return nil, fmt.Errorf("lock the deploys %s needs: %w", version, err)
	}
	have := map[string]bool{}
	for _, id := range found {
		have[id] = true
	}
	for _, id := range after {
		if !have[id] {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

func placeholders(ids []string) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return strings.TrimSuffix(strings.Repeat("?,", len(ids)), ","), args
}

// queryIDs runs query on q and returns the one column of its rows.
func queryIDs(ctx context.Context, q querier, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// rollbacksKeptQuery is the pairs stillNeeded keeps for promotion: a
// SUCCESS rollback and the deploy it went back from, until that version
// succeeds there again. It searches the rollbacks alone (partial index
// manent_deployments_rollbacks, migration 31), not every success.
const rollbacksKeptQuery = `SELECT r.id || ' ' || d.id FROM manent_deployments r
		JOIN manent_deployments d ON d.id = r.rollback_of
		WHERE r.rollback_of <> '' AND r.state = 'SUCCESS' AND NOT EXISTS (SELECT 1 FROM manent_deployments s
			WHERE s.application = d.application AND s.environment = d.environment AND s.version = d.version
			AND s.state = 'SUCCESS' AND s.finished_at > r.finished_at)`

// stillNeeded returns the final deploys retention.deploys must keep,
// however old:
//   - each environment's current release and last failure (the inventory);
//   - the release before each current one: what `manent rollback` goes
//     back to (ReleaseBefore);
//   - the deploys a deploy not yet final comes after (`after`): its gate
//     checks them when its wait is over (a schedule.at months away), and
//     one gone would end it DEPENDENCY_FAILED;
//   - the successes of a deploy not yet final's application and version
//     (Successes): governance judges promotion again when it starts, and
//     one gone would refuse it.
//
// It reads through q (the pool, or the deleting transaction) in a number
// of queries that does not grow with the waiting deploys: one per
// environment (the release before its current one) and three more; of
// the waiting deploys' saved inputs it reads only those that name an
// `after`.
func (s *Store) stillNeeded(ctx context.Context, q querier) (map[string]bool, error) {
	keep := map[string]bool{}
	rows, err := q.QueryContext(ctx, `SELECT application, environment, current, last_failure FROM manent_inventory`)
	if err != nil {
		return nil, err
	}
	type env struct {
		app, env string
		cur      manent.Release
	}
	var envs []env
	for rows.Next() {
		var app, name string
		var cur, fail sql.NullString
		if err := rows.Scan(&app, &name, &cur, &fail); err != nil {
			rows.Close()
			return nil, err
		}
		if f := decodeRelease(fail); f != nil {
			keep[f.DeploymentID] = true
		}
		if c := decodeRelease(cur); c != nil {
			keep[c.DeploymentID] = true
			envs = append(envs, env{app, name, *c})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, e := range envs {
		at := fmtTime(time.Now())
		if e.cur.FinishedAt != nil {
			at = fmtTime(*e.cur.FinishedAt)
		}
		prev, err := queryIDs(ctx, q, s.q(`SELECT id FROM manent_deployments
			WHERE application = ? AND environment = ? AND state = 'SUCCESS' AND id <> ? AND version <> ? AND finished_at <= ?
			ORDER BY finished_at DESC, id DESC LIMIT 1`), e.app, e.env, e.cur.DeploymentID, e.cur.Version, at)
		if err != nil {
			return nil, fmt.Errorf("the release before %s's current one: %w", e.env, err)
		}
		for _, id := range prev {
			keep[id] = true
		}
	}
	// Promotion: every success of a version a waiting deploy deploys
	// (more than the latest per environment Successes returns: kept
	// rather than judged here).
	succ, err := queryIDs(ctx, q, `SELECT d.id FROM manent_deployments d
		WHERE d.state = 'SUCCESS' AND EXISTS (SELECT 1 FROM manent_deployments w
			WHERE w.state IN (`+unfinishedStates()+`) AND w.application = d.application AND w.version = d.version)`)
	if err != nil {
		return nil, fmt.Errorf("the successes waiting deploys need: %w", err)
	}
	for _, id := range succ {
		keep[id] = true
	}
	// A rollback that ended SUCCESS, and the deploy it went back from,
	// until the version rolled back succeeds there again: promotion reads
	// the pair (RolledBackSince) to not count that version's earlier
	// successes there, which another rule may keep (a waiting deploy).
	rolled, err := queryIDs(ctx, q, rollbacksKeptQuery)
	if err != nil {
		return nil, fmt.Errorf("the rollbacks promotion reads: %w", err)
	}
	for _, pair := range rolled {
		for id := range strings.FieldsSeq(pair) {
			keep[id] = true
		}
	}
	// The saved input is pkg/plan's Input, compact JSON; only its waits
	// are read, and only of the inputs that name an `after`.
	rows, err = q.QueryContext(ctx, `SELECT id, input FROM manent_deployments
		WHERE state IN (`+unfinishedStates()+`) AND input LIKE '%"after":[%'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, raw string
		if err := rows.Scan(&id, &raw); err != nil {
			return nil, err
		}
		var in struct {
			Waits struct {
				After []string `json:"after"`
			} `json:"waits"`
		}
		if err := json.Unmarshal([]byte(raw), &in); err != nil {
			return nil, fmt.Errorf("read the waits of %s: %w", id, err)
		}
		for _, dep := range in.Waits.After {
			keep[dep] = true
		}
	}
	return keep, rows.Err()
}

func (s *Store) ids(ctx context.Context, query string, args ...any) ([]string, error) {
	return queryIDs(ctx, s.rdb, s.q(query), args...)
}

// markPrunedTx records, per application/environment, the newest finished_at
// of the deploys in (placeholders in, args) about to be removed, unless a
// later one is recorded: DORA reads it to say a window reaching back before
// it is partial (PrunedThrough).
func (s *Store) markPrunedTx(ctx context.Context, tx *sql.Tx, in string, args []any) error {
	_, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_inventory (application, environment, pruned_through)
		SELECT application, environment, MAX(finished_at) FROM manent_deployments WHERE id IN (`+in+`) GROUP BY application, environment
		ON CONFLICT (application, environment) DO UPDATE SET pruned_through = CASE
			WHEN manent_inventory.pruned_through IS NULL OR manent_inventory.pruned_through < excluded.pruned_through
			THEN excluded.pruned_through ELSE manent_inventory.pruned_through END`), args...)
	if err != nil {
		return fmt.Errorf("record what retention removed: %w", err)
	}
	return nil
}

// Pruned is when retention.deploys last removed deploys of one
// application/environment: Through is the newest finished_at among them.
type Pruned struct {
	Application string
	Environment string
	Through     time.Time
}

// PrunedThrough returns, for each application/environment of the filter
// (each "" for all) whose deploys retention.deploys removed, the newest
// finished_at among those it removed.
func (s *Store) PrunedThrough(ctx context.Context, application, environment string) ([]Pruned, error) {
	q := `SELECT application, environment, pruned_through FROM manent_inventory WHERE pruned_through IS NOT NULL`
	var args []any
	if application != "" {
		q += ` AND application = ?`
		args = append(args, application)
	}
	if environment != "" {
		q += ` AND environment = ?`
		args = append(args, environment)
	}
	rows, err := s.rdb.QueryContext(ctx, s.q(q), args...)
	if err != nil {
		return nil, fmt.Errorf("read what retention removed: %w", err)
	}
	defer rows.Close()
	var out []Pruned
	for rows.Next() {
		var p Pruned
		var at sql.NullString
		if err := rows.Scan(&p.Application, &p.Environment, &at); err != nil {
			return nil, err
		}
		if t := parseTime(at); t != nil {
			p.Through = *t
			out = append(out, p)
		}
	}
	return out, rows.Err()
}
