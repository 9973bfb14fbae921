package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// finalStates is the SQL list of final states.
func finalStates() string { return statesSQL(true) }

// WorkflowsToDelete returns up to limit final deploys, oldest finished
// first, that finished before `before` and whose DBOS workflows are kept.
func (s *Store) WorkflowsToDelete(ctx context.Context, before time.Time, limit int) ([]string, error) {
	return s.ids(ctx, `SELECT id FROM manent_deployments
		WHERE finished_at < ? AND workflows_deleted_at IS NULL AND state IN (`+finalStates()+`)
		ORDER BY finished_at LIMIT ?`, fmtTime(before), limit)
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

// PruneLogs removes the log lines of up to limit final deploys that
// finished before `before` (their other events stay: state, steps, the
// outcome). It returns how many deploys it pruned.
func (s *Store) PruneLogs(ctx context.Context, before time.Time, limit int) (int, error) {
	ids, err := s.ids(ctx, `SELECT id FROM manent_deployments
		WHERE finished_at < ? AND logs_pruned_at IS NULL AND state IN (`+finalStates()+`)
		ORDER BY finished_at LIMIT ?`, fmtTime(before), limit)
	if err != nil {
		return 0, err
	}
	now := fmtTime(time.Now())
	for _, id := range ids {
		err := s.Tx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM manent_events WHERE deployment_id = ? AND type = ?`), id, EventLog); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, s.q(`UPDATE manent_deployments SET logs_pruned_at = ? WHERE id = ?`), now, id)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("prune logs of %s: %w", id, err)
		}
	}
	return len(ids), nil
}

// PruneDeploys removes up to limit final deploys that finished before
// `before` and whose DBOS workflows are already deleted, with their steps,
// events and approvals — except those something still needs (stillNeeded).
// The audit log is not touched: its chain still verifies. It returns how
// many it removed.
func (s *Store) PruneDeploys(ctx context.Context, before time.Time, limit int) (int, error) {
	keep, err := s.stillNeeded(ctx)
	if err != nil {
		return 0, err
	}
	ids, err := s.ids(ctx, `SELECT id FROM manent_deployments
		WHERE finished_at < ? AND workflows_deleted_at IS NOT NULL AND state IN (`+finalStates()+`)
		ORDER BY finished_at LIMIT ?`, fmtTime(before), limit+len(keep))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		if keep[id] || n == limit {
			continue
		}
		err := s.Tx(ctx, func(tx *sql.Tx) error {
			// The children are removed explicitly: PostgreSQL and SQLite
			// cascade, but an older database may lack a constraint.
			for _, table := range []string{"manent_steps", "manent_events", "manent_approvals", "manent_wave_approvals"} {
				if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM `+table+` WHERE deployment_id = ?`), id); err != nil {
					return fmt.Errorf("%s: %w", table, err)
				}
			}
			_, err := tx.ExecContext(ctx, s.q(`DELETE FROM manent_deployments WHERE id = ?`), id)
			return err
		})
		if err != nil {
			return n, fmt.Errorf("prune deploy %s: %w", id, err)
		}
		n++
	}
	return n, nil
}

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
func (s *Store) stillNeeded(ctx context.Context) (map[string]bool, error) {
	inv, err := s.Inventory(ctx)
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for _, e := range inv {
		if e.LastFailure != nil {
			keep[e.LastFailure.DeploymentID] = true
		}
		if e.Current == nil {
			continue
		}
		keep[e.Current.DeploymentID] = true
		prev, err := s.ReleaseBefore(ctx, e.Application, e.Environment, *e.Current)
		if err != nil {
			return nil, err
		}
		if prev != nil {
			keep[prev.ID] = true
		}
	}
	waiting, err := s.Unfinished(ctx)
	if err != nil {
		return nil, err
	}
	versions := map[[2]string]bool{}
	for _, r := range waiting {
		// The saved input is pkg/plan's Input; only its waits are read.
		var in struct {
			Waits struct {
				After []string `json:"after"`
			} `json:"waits"`
		}
		if len(r.Input) > 0 {
			if err := json.Unmarshal(r.Input, &in); err != nil {
				return nil, fmt.Errorf("read the waits of %s: %w", r.ID, err)
			}
		}
		for _, id := range in.Waits.After {
			keep[id] = true
		}
		versions[[2]string{r.Application, r.Version}] = true
	}
	for av := range versions {
		succ, err := s.Successes(ctx, av[0], av[1])
		if err != nil {
			return nil, err
		}
		for _, r := range succ {
			keep[r.ID] = true
		}
	}
	return keep, nil
}

func (s *Store) ids(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, s.q(query), args...)
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
