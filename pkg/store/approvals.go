package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/manent-io/manent/pkg/manent"
)

// ErrAlreadyDecided is returned when an identity approves or rejects a
// deploy it already approved or rejected.
var ErrAlreadyDecided = errors.New("already decided")

// ErrNotAwaitingApproval is returned when a verdict comes for a deploy that
// no longer waits for approvals (its gate queued it, or it ended): it
// would be recorded and not count.
var ErrNotAwaitingApproval = errors.New("not awaiting approval")

// AddApproval records one identity's approval or rejection, once per
// identity, with an `approval` event, while the deploy is
// AWAITING_APPROVAL. The state is read under the deploy's row lock
// (LockDeploymentTx), as the gate reads it when it queues the deploy: a
// rejection either commits before the gate queues the deploy, and the gate
// sees it, or after, and is refused (ErrNotAwaitingApproval).
//
// recount, when given, runs under that lock after the verdict is recorded,
// with the deploy's reason: a reason it returns ("" keeps the one there)
// is written with a state event, as the gate writes its own — status
// counts the verdict as soon as the call returns, and a count the gate
// takes under the same lock cannot overwrite it with fewer.
func (s *Store) AddApproval(ctx context.Context, id string, a manent.Approval, recount func(tx *sql.Tx, reason string) (string, error)) error {
	return s.Tx(ctx, func(tx *sql.Tx) error {
		state, _, err := s.LockDeploymentTx(ctx, tx, id)
		if err != nil {
			return err
		}
		if state != manent.StateAwaitingApproval {
			return fmt.Errorf("%w: deploy %s is %s", ErrNotAwaitingApproval, id, state)
		}
		var reason string
		if err := tx.QueryRowContext(ctx, s.q(`SELECT reason FROM manent_deployments WHERE id = ?`), id).Scan(&reason); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM manent_approvals WHERE deployment_id = ? AND identity = ?`), id, a.Identity).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return ErrAlreadyDecided
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_approvals (deployment_id, identity, verdict, comment, plan_digest, time) VALUES (?, ?, ?, ?, ?, ?)`),
			id, a.Identity, a.Verdict, a.Comment, a.PlanDigest, fmtTime(a.Time)); err != nil {
			return fmt.Errorf("record approval: %w", err)
		}
		if _, err := s.appendEvent(ctx, tx, id, EventApproval, a.Time, a); err != nil || recount == nil {
			return err
		}
		now, err := recount(tx, reason)
		if err != nil || now == "" {
			return err
		}
		_, err = s.SetStateTx(ctx, tx, id, manent.StateAwaitingApproval, now)
		return err
	})
}

// ApprovalsTx is Approvals in tx (after LockDeploymentTx: the verdicts no
// other writer can add to before tx ends).
func (s *Store) ApprovalsTx(ctx context.Context, tx *sql.Tx, id string) ([]manent.Approval, error) {
	return s.approvals(ctx, tx, id)
}

// Approvals returns a deploy's approvals and rejections, oldest first.
func (s *Store) Approvals(ctx context.Context, id string) ([]manent.Approval, error) {
	return s.approvals(ctx, s.rdb, id)
}

func (s *Store) approvals(ctx context.Context, q querier, id string) ([]manent.Approval, error) {
	rows, err := q.QueryContext(ctx, s.q(`SELECT identity, verdict, comment, plan_digest, time FROM manent_approvals WHERE deployment_id = ? ORDER BY time`), id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []manent.Approval
	for rows.Next() {
		var a manent.Approval
		var at string
		if err := rows.Scan(&a.Identity, &a.Verdict, &a.Comment, &a.PlanDigest, &at); err != nil {
			return nil, err
		}
		if t := parseTime(sql.NullString{String: at, Valid: true}); t != nil {
			a.Time = *t
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Waiting returns the deploys in state whose input mentions needle (e.g.
// the deploys waiting on a dependency).
func (s *Store) Waiting(ctx context.Context, state manent.State, needle string) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT id, input FROM manent_deployments WHERE state = ?`), string(state))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, input string
		if err := rows.Scan(&id, &input); err != nil {
			return nil, err
		}
		if strings.Contains(input, needle) {
			out = append(out, id)
		}
	}
	return out, rows.Err()
}

// SetReason updates why a waiting deploy waits, without a state change.
func (s *Store) SetReason(ctx context.Context, id, reason string) error {
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE manent_deployments SET reason = ? WHERE id = ? AND reason <> ?`), reason, id, reason)
	return err
}

// AddWaveApproval records one identity's decision on a rollout wave, once
// per identity and wave, with an `approval` event, under the deploy's row
// lock (LockDeploymentTx), as the run counts the wave's approvals.
//
// recount, when given, runs under that lock after the decision is
// recorded, as AddApproval's does, with the deploy's reason: a reason it
// returns ("" keeps the one there) is written with a state event (the
// deploy's state unchanged), as the run writes its own — status counts the
// decision as soon as the call returns, and a count the run takes under
// the same lock cannot overwrite it with fewer.
//
// The wave waits while its step (step: approval[<wave>]) runs; the run
// ends that step under the same lock when it decides, so a decision
// recorded after is refused (ErrNotAwaitingApproval) rather than accepted
// and never counted.
func (s *Store) AddWaveApproval(ctx context.Context, id, wave, step string, a manent.Approval, recount func(tx *sql.Tx, reason string) (string, error)) error {
	return s.Tx(ctx, func(tx *sql.Tx) error {
		state, _, err := s.LockDeploymentTx(ctx, tx, id)
		if err != nil {
			return err
		}
		var stepState string
		err = tx.QueryRowContext(ctx, s.q(`SELECT state FROM manent_steps WHERE deployment_id = ? AND name = ?`), id, step).Scan(&stepState)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && manent.StepState(stepState) != manent.StepRunning) {
			return fmt.Errorf("%w: wave %s of deploy %s (its step %s is %s)", ErrNotAwaitingApproval, wave, id, step, cmp.Or(stepState, "not started"))
		}
		if err != nil {
			return err
		}
		var reason string
		if err := tx.QueryRowContext(ctx, s.q(`SELECT reason FROM manent_deployments WHERE id = ?`), id).Scan(&reason); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM manent_wave_approvals WHERE deployment_id = ? AND wave = ? AND identity = ?`), id, wave, a.Identity).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return ErrAlreadyDecided
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_wave_approvals (deployment_id, wave, identity, verdict, comment, time) VALUES (?, ?, ?, ?, ?, ?)`),
			id, wave, a.Identity, a.Verdict, a.Comment, fmtTime(a.Time)); err != nil {
			return fmt.Errorf("record wave approval: %w", err)
		}
		if _, err := s.appendEvent(ctx, tx, id, EventApproval, a.Time, map[string]any{"wave": wave, "identity": a.Identity, "verdict": a.Verdict, "comment": a.Comment}); err != nil || recount == nil {
			return err
		}
		now, err := recount(tx, reason)
		if err != nil || now == "" {
			return err
		}
		_, err = s.SetStateTx(ctx, tx, id, state, now)
		return err
	})
}

// AllWaveApprovals returns the decisions on every wave of a deploy, by
// wave, each wave's oldest first.
func (s *Store) AllWaveApprovals(ctx context.Context, id string) (map[string][]manent.Approval, error) {
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT wave, identity, verdict, comment, time FROM manent_wave_approvals WHERE deployment_id = ? ORDER BY time`), id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]manent.Approval{}
	for rows.Next() {
		var wave, at string
		var a manent.Approval
		if err := rows.Scan(&wave, &a.Identity, &a.Verdict, &a.Comment, &at); err != nil {
			return nil, err
		}
		if t := parseTime(sql.NullString{String: at, Valid: true}); t != nil {
			a.Time = *t
		}
		out[wave] = append(out[wave], a)
	}
	return out, rows.Err()
}

// WaveApprovals returns the decisions on one wave, oldest first.
func (s *Store) WaveApprovals(ctx context.Context, id, wave string) ([]manent.Approval, error) {
	return s.waveApprovals(ctx, s.rdb, id, wave)
}

// WaveApprovalsTx is WaveApprovals in tx (after LockDeploymentTx: the
// decisions no other writer can add to before tx ends).
func (s *Store) WaveApprovalsTx(ctx context.Context, tx *sql.Tx, id, wave string) ([]manent.Approval, error) {
	return s.waveApprovals(ctx, tx, id, wave)
}

func (s *Store) waveApprovals(ctx context.Context, q querier, id, wave string) ([]manent.Approval, error) {
	rows, err := q.QueryContext(ctx, s.q(`SELECT identity, verdict, comment, time FROM manent_wave_approvals WHERE deployment_id = ? AND wave = ? ORDER BY time`), id, wave)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []manent.Approval
	for rows.Next() {
		var a manent.Approval
		var at string
		if err := rows.Scan(&a.Identity, &a.Verdict, &a.Comment, &at); err != nil {
			return nil, err
		}
		if t := parseTime(sql.NullString{String: at, Valid: true}); t != nil {
			a.Time = *t
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
