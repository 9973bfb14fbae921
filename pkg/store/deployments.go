package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// Record is a deployment row: what users see plus what the engine keeps.
type Record struct {
	manent.Deployment
	// Input is the workflow input saved at submission (JSON).
	Input           json.RawMessage
	CancelRequested bool
	// CommittedAt is the descriptor's source.committed_at (DORA lead time).
	CommittedAt *time.Time
}

const deploymentColumns = `id, application, environment, version, state, requester, created_at,
	started_at, finished_at, error, rollback, reason, decision, input, artifact_sha256, cancel_requested, rollback_of`

func scanRecord(row interface{ Scan(...any) error }) (*Record, error) {
	var r Record
	var created string
	var started, finished, decision sql.NullString
	var input string
	var cancel int
	err := row.Scan(&r.ID, &r.Application, &r.Environment, &r.Version, &r.State, &r.Requester, &created,
		&started, &finished, &r.Error, &r.Rollback, &r.Reason, &decision, &input, &r.ArtifactSHA256, &cancel, &r.RollbackOf)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if t := parseTime(sql.NullString{String: created, Valid: true}); t != nil {
		r.CreatedAt = *t
	}
	r.StartedAt = parseTime(started)
	r.FinishedAt = parseTime(finished)
	if decision.Valid && decision.String != "" {
		var d manent.Decision
		if json.Unmarshal([]byte(decision.String), &d) == nil {
			r.Decision = &d
		}
	}
	r.Input = json.RawMessage(input)
	r.CancelRequested = cancel != 0
	return &r, nil
}

// InsertDeployment inserts a new deployment row in tx, with its first
// `state` event.
func (s *Store) InsertDeployment(ctx context.Context, tx *sql.Tx, r *Record) error {
	var decision any
	if r.Decision != nil {
		b, _ := json.Marshal(r.Decision)
		decision = string(b)
	}
	// The deploy's first event is number 1: next_seq starts after it.
	_, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_deployments (`+deploymentColumns+`, committed_at, next_seq)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 2)`),
		r.ID, r.Application, r.Environment, r.Version, string(r.State), r.Requester, fmtTime(r.CreatedAt),
		fmtTimePtr(r.StartedAt), fmtTimePtr(r.FinishedAt), r.Error, r.Rollback, r.Reason, decision,
		string(r.Input), r.ArtifactSHA256, boolInt(r.CancelRequested), r.RollbackOf, fmtTimePtr(r.CommittedAt))
	if err != nil {
		return fmt.Errorf("insert deployment: %w", err)
	}
	b, err := json.Marshal(stateEvent(r.State, r.Reason, ""))
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_events (deployment_id, seq, type, time, data) VALUES (?, 1, ?, ?, ?)`),
		r.ID, EventState, fmtTime(r.CreatedAt), string(b)); err != nil {
		return fmt.Errorf("append event: %w", err)
	}
	s.hooks.record(tx, Event{DeploymentID: r.ID, Seq: 1, Type: EventState, Time: r.CreatedAt.UTC(), Data: json.RawMessage(b)})
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Deployment returns one deployment with its steps.
func (s *Store) Deployment(ctx context.Context, id string) (*Record, error) {
	r, err := scanRecord(s.rdb.QueryRowContext(ctx, s.q(`SELECT `+deploymentColumns+` FROM manent_deployments WHERE id = ?`), id))
	if err != nil {
		return nil, err
	}
	steps, err := s.Steps(ctx, id)
	if err != nil {
		return nil, err
	}
	r.Steps = steps
	return r, nil
}

// Filter selects deployments for List.
type Filter struct {
	Application string
	Environment string
	States      []manent.State
	Limit       int
	Cursor      string
}

// listQuery is List's query: every filter has an index (the EXPLAIN test).
func listQuery(f Filter) (string, []any, error) {
	var where []string
	var args []any
	if f.Application != "" {
		where = append(where, "application = ?")
		args = append(args, f.Application)
	}
	if f.Environment != "" {
		where = append(where, "environment = ?")
		args = append(args, f.Environment)
	}
	if len(f.States) > 0 {
		ph := make([]string, len(f.States))
		for i, st := range f.States {
			ph[i] = "?"
			args = append(args, string(st))
		}
		where = append(where, "state IN ("+strings.Join(ph, ",")+")")
	}
	if f.Cursor != "" {
		created, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return "", nil, &manent.Error{Code: manent.EInvalid,
				Message: fmt.Sprintf("invalid cursor %q: give the next_cursor of the page before, unchanged (no cursor for the first page)", manent.ClipText(f.Cursor, 64)),
				Fields:  []manent.FieldError{{Path: "query.cursor", Message: "not a next_cursor this server gave"}}}
		}
		where = append(where, "(created_at < ? OR (created_at = ? AND id < ?))")
		args = append(args, created, created, id)
	}
	query := `SELECT ` + deploymentColumns + ` FROM manent_deployments`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += fmt.Sprintf(" ORDER BY created_at DESC, id DESC LIMIT %d", f.Limit+1)
	return query, args, nil
}

// List returns deployments newest first (without steps) and the cursor of
// the next page ("" on the last page).
func (s *Store) List(ctx context.Context, f Filter) ([]Record, string, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	query, args, err := listQuery(f)
	if err != nil {
		return nil, "", err
	}
	rows, err := s.rdb.QueryContext(ctx, s.q(query), s.planned(args)...)
	if err != nil {
		return nil, "", fmt.Errorf("list deployments: %w", err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, "", err
		}
		out = append(out, *r)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > f.Limit {
		out = out[:f.Limit]
		last := out[len(out)-1]
		next = encodeCursor(fmtTime(last.CreatedAt), last.ID)
	}
	return out, next, nil
}

func encodeCursor(created, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(created + "|" + id))
}

func decodeCursor(c string) (string, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", "", err
	}
	created, id, ok := strings.Cut(string(b), "|")
	if !ok {
		return "", "", errors.New("bad cursor")
	}
	return created, id, nil
}

// scanRecords reads every row of a query of deploymentColumns and closes
// rows.
func scanRecords(rows *sql.Rows) ([]Record, error) {
	defer rows.Close()
	var out []Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	return out, rows.Err()
}

func unfinishedQuery(columns string) string {
	return `SELECT ` + columns + ` FROM manent_deployments WHERE state IN (` + unfinishedStates() + `) ORDER BY created_at`
}

// briefColumns are deploymentColumns without the decision and the saved
// input, scanned as NULL and empty (UnfinishedBrief).
var briefColumns = strings.Replace(deploymentColumns, "decision, input,", "NULL, '',", 1)

// Unfinished returns the deployments not in a final state, oldest first.
func (s *Store) Unfinished(ctx context.Context) ([]Record, error) {
	rows, err := s.rdb.QueryContext(ctx, unfinishedQuery(deploymentColumns))
	if err != nil {
		return nil, err
	}
	return scanRecords(rows)
}

// UnfinishedBrief is Unfinished without each deployment's decision and
// saved input (Record.Decision nil, Record.Input empty): what lists of
// thousands of waiting deploys show needs neither, and the input (the
// whole descriptor and plan) is most of a row.
func (s *Store) UnfinishedBrief(ctx context.Context) ([]Record, error) {
	rows, err := s.rdb.QueryContext(ctx, unfinishedQuery(briefColumns))
	if err != nil {
		return nil, err
	}
	return scanRecords(rows)
}

// UnfinishedWithPrefix returns the deployments not in a final state whose
// id starts with prefix (the ticks of a schedule: "<schedule id>@"), oldest
// first.
func (s *Store) UnfinishedWithPrefix(ctx context.Context, prefix string) ([]Record, error) {
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT `+deploymentColumns+` FROM manent_deployments
		WHERE state IN (`+unfinishedStates()+`) AND substr(id, 1, ?) = ? ORDER BY created_at`), len(prefix), prefix)
	if err != nil {
		return nil, err
	}
	return scanRecords(rows)
}

// SetState moves a deployment to state (with the reason it waits, if any),
// recording a `state` event. A final state is never left: moving a final
// deployment is a no-op that returns false.
func (s *Store) SetState(ctx context.Context, id string, state manent.State, reason string) (bool, error) {
	changed := false
	err := s.Tx(ctx, func(tx *sql.Tx) error {
		var err error
		changed, err = s.SetStateTx(ctx, tx, id, state, reason)
		return err
	})
	return changed, err
}

// SetStateTx is SetState in tx.
func (s *Store) SetStateTx(ctx context.Context, tx *sql.Tx, id string, state manent.State, reason string) (bool, error) {
	var cur, curReason string
	err := tx.QueryRowContext(ctx, s.q(`SELECT state, reason FROM manent_deployments WHERE id = ?`), id).Scan(&cur, &curReason)
	if errors.Is(err, sql.ErrNoRows) {
		return false, ErrNotFound
	}
	if err != nil {
		return false, err
	}
	if manent.State(cur).Final() || (manent.State(cur) == state && reason == curReason) {
		return false, nil
	}
	now := time.Now()
	query := `UPDATE manent_deployments SET state = ?, reason = ? WHERE id = ?`
	args := []any{string(state), reason, id}
	if state == manent.StatePending {
		query = `UPDATE manent_deployments SET state = ?, reason = ?, started_at = COALESCE(started_at, ?) WHERE id = ?`
		args = []any{string(state), reason, fmtTime(now), id}
	}
	if _, err := tx.ExecContext(ctx, s.q(query), args...); err != nil {
		return false, err
	}
	_, err = s.appendEvent(ctx, tx, id, EventState, now, stateEvent(state, reason, ""))
	return err == nil, err
}

// ClearReason empties the reason of running deploy id when it still
// starts with one of prefixes (nobody wrote another since), with a state
// event as SetState's. It reports whether it changed it. A reason that
// does not match costs one read, no write.
func (s *Store) ClearReason(ctx context.Context, id string, prefixes ...string) (bool, error) {
	ours := func(state, reason string) bool {
		return manent.State(state) == manent.StatePending && reason != "" &&
			slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(reason, p) })
	}
	var cur, reason string
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT state, reason FROM manent_deployments WHERE id = ?`), id).Scan(&cur, &reason)
	if errors.Is(err, sql.ErrNoRows) {
		return false, ErrNotFound
	}
	if err != nil || !ours(cur, reason) {
		return false, err
	}
	changed := false
	err = s.Tx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, s.q(`SELECT state, reason FROM manent_deployments WHERE id = ?`), id).Scan(&cur, &reason)
		if err != nil || !ours(cur, reason) {
			return err
		}
		changed, err = s.SetStateTx(ctx, tx, id, manent.StatePending, "")
		return err
	})
	return changed, err
}

// LockDeploymentTx reads a deploy's state and whether a cancel was asked
// for, in tx. On PostgreSQL it locks the deploy's row until tx ends (on
// SQLite write transactions run one at a time): a decision taken on what it
// read, and the write that follows, commit before another writer of the
// deploy that locks it too reads anything.
func (s *Store) LockDeploymentTx(ctx context.Context, tx *sql.Tx, id string) (manent.State, bool, error) {
	lock := ""
	if s.postgres {
		lock = " FOR UPDATE"
	}
	var st string
	var cancel int
	err := tx.QueryRowContext(ctx, s.q(`SELECT state, cancel_requested FROM manent_deployments WHERE id = ?`+lock), id).Scan(&st, &cancel)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, ErrNotFound
	}
	return manent.State(st), cancel != 0, err
}

func (s *Store) currentState(ctx context.Context, q querier, id string) (manent.State, error) {
	var st string
	err := q.QueryRowContext(ctx, s.q(`SELECT state FROM manent_deployments WHERE id = ?`), id).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	return manent.State(st), err
}

// CancelRequest asks for a deploy to be cancelled (RequestCancel).
type CancelRequest struct {
	// Reason is the error the deploy ends with when the request cancels
	// it: "cancelled" for a user's cancel, "superseded by <id>" for a
	// schedule tick a later one replaced.
	Reason string
	// States, when set, limits the request to a deploy in one of them: in
	// any other state nothing is recorded.
	States []manent.State
	// Also runs in the transaction that sets the flag, only when this
	// request sets it (the deploy's first): its audit entry.
	Also func(tx *sql.Tx) error
}

// RequestCancel sets the cancel flag the workflow checks between steps,
// with its reason, and returns the state the deployment is in and whether
// this request set the flag. A deploy already flagged keeps the first
// request's reason (CancelReason); a final one, or one in none of
// req.States, is left as it is.
func (s *Store) RequestCancel(ctx context.Context, id string, req CancelRequest) (st manent.State, set bool, err error) {
	err = s.Tx(ctx, func(tx *sql.Tx) error {
		set = false
		// The update holds only if the state is still the one read (on
		// PostgreSQL a worker may move it meanwhile): read again then.
		for range 3 {
			var err error
			if st, err = s.currentState(ctx, tx, id); err != nil {
				return err
			}
			if st.Final() || len(req.States) > 0 && !slices.Contains(req.States, st) {
				return nil
			}
			res, err := tx.ExecContext(ctx, s.q(`UPDATE manent_deployments SET cancel_requested = 1, cancel_reason = ?
				WHERE id = ? AND cancel_requested = 0 AND state = ?`), req.Reason, id, string(st))
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				var flagged int
				if err := tx.QueryRowContext(ctx, s.q(`SELECT cancel_requested FROM manent_deployments WHERE id = ?`), id).Scan(&flagged); err != nil {
					return err
				}
				if flagged != 0 {
					return nil // an earlier request's
				}
				continue // the state moved
			}
			set = true
			text := "cancel requested"
			switch {
			case strings.HasPrefix(req.Reason, "cancelled by "):
				text += strings.TrimPrefix(req.Reason, "cancelled") // " by token:ci"
			case req.Reason != "" && req.Reason != "cancelled":
				text += " (" + req.Reason + ")"
			}
			if _, err := s.appendEvent(ctx, tx, id, EventLog, time.Now(), LogData{Text: text}); err != nil {
				return err
			}
			if req.Also != nil {
				return req.Also(tx)
			}
			return nil
		}
		return nil
	})
	return st, set, err
}

// CancelRequested reports whether cancel was asked for.
func (s *Store) CancelRequested(ctx context.Context, id string) (bool, error) {
	var n int
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT cancel_requested FROM manent_deployments WHERE id = ?`), id).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return false, ErrNotFound
	}
	return n != 0, err
}

// CancelReason is the reason of the request that flagged the deploy for
// cancel, "" when none did (or a deploy flagged before reasons were kept).
func (s *Store) CancelReason(ctx context.Context, id string) (string, error) {
	var reason sql.NullString
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT cancel_reason FROM manent_deployments WHERE id = ?`), id).Scan(&reason)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	return reason.String, err
}

// Outcome is how a deployment ended.
type Outcome struct {
	State    manent.State
	Error    string
	Rollback string
	SHA256   string
	At       time.Time
	// Live says the deploy's release is live although it did not end
	// SUCCESS (it was activated, then failed and was not compensated): the
	// inventory must name what really runs.
	Live bool
}

// CancelTooLate is the log line of a deploy that ends SUCCESS although its
// cancel was asked for: the request came during its last step.
const CancelTooLate = "cancel requested during the last step: a running step is never cut short, and no step was left to stop; the deploy completed"

// Finish records a final state, marks the steps that never ran SKIPPED,
// and writes the inventory, a `done` event and the `deployment.finish`
// audit entry, in one transaction. Finishing an already final deployment
// changes nothing.
func (s *Store) Finish(ctx context.Context, id string, o Outcome) error {
	return s.Tx(ctx, func(tx *sql.Tx) error {
		_, err := s.FinishTx(ctx, tx, id, o)
		return err
	})
}

// FinishTx is Finish in tx; it reports whether the deployment changed (false
// when it was already final), so a caller can add to the same transaction
// what must happen once per ending. then, if given, runs in tx after the
// deployment's writes, whether or not it changed, and before the
// `deployment.finish` audit entry: the entry is the transaction's last
// statement, because on PostgreSQL the audit chain's head row stays locked
// from the entry to the commit, and every submit and finish of every worker
// waits for it.
func (s *Store) FinishTx(ctx context.Context, tx *sql.Tx, id string, o Outcome, then ...func(changed bool) error) (bool, error) {
	if !o.State.Final() {
		return false, fmt.Errorf("finish %s: %s is not a final state", id, o.State)
	}
	r, err := scanRecord(tx.QueryRowContext(ctx, s.q(`SELECT `+deploymentColumns+` FROM manent_deployments WHERE id = ?`), id))
	if err != nil {
		return false, err
	}
	if r.State.Final() {
		for _, f := range then {
			if err := f(false); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	if err := s.closeSteps(ctx, tx, id, o.At, o.State); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, s.q(`UPDATE manent_deployments SET state = ?, reason = '', error = ?, rollback = ?,
		artifact_sha256 = CASE WHEN ? <> '' THEN ? ELSE artifact_sha256 END, finished_at = ? WHERE id = ?`),
		string(o.State), o.Error, o.Rollback, o.SHA256, o.SHA256, fmtTime(o.At), id); err != nil {
		return false, err
	}
	if o.State == manent.StateSuccess {
		// The failures before it are restored now, recorded on each: DORA
		// reads it there, whatever retention removes later.
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE manent_deployments SET restored_at = ?
			WHERE application = ? AND environment = ? AND restored_at IS NULL AND state IN (?, ?, ?) AND finished_at <= ?`),
			fmtTime(o.At), r.Application, r.Environment, string(manent.StateError), string(manent.StateMaxRecoveryAttemptsExceeded),
			string(manent.StateCancelled), fmtTime(o.At)); err != nil {
			return false, fmt.Errorf("record the failures %s restored: %w", id, err)
		}
	}
	at := o.At.UTC()
	rel := manent.Release{DeploymentID: id, Version: r.Version, SHA256: o.SHA256, FinishedAt: &at, Error: o.Error, Rollback: o.Rollback}
	if o.State == manent.StateSuccess || o.Live {
		if err := s.setInventory(ctx, tx, r.Application, r.Environment, "current", rel); err != nil {
			return false, err
		}
	}
	switch o.State {
	case manent.StateError, manent.StateMaxRecoveryAttemptsExceeded:
		if err := s.setInventory(ctx, tx, r.Application, r.Environment, "last_failure", rel); err != nil {
			return false, err
		}
	}
	// The final state, then the stream's end: one sequence bump, one INSERT.
	evs := make([]newEvent, 0, 3)
	if o.State == manent.StateSuccess && r.CancelRequested {
		// Asked for during the plan's last step (or its cleanup): a
		// running step is never cut short, and none was left to stop.
		evs = append(evs, newEvent{typ: EventLog, at: o.At, data: LogData{Text: CancelTooLate}})
	}
	evs = append(evs,
		newEvent{typ: EventState, at: o.At, data: stateEvent(o.State, "", o.Error)},
		newEvent{typ: EventDone, at: o.At, data: DoneData{State: o.State, Error: o.Error, Rollback: o.Rollback}})
	if _, err := s.appendEventsCancel(ctx, tx, id, evs); err != nil {
		return false, err
	}
	for _, f := range then {
		if err := f(true); err != nil {
			return false, err
		}
	}
	return true, s.appendAudit(ctx, tx, AuditEntry{
		Time: o.At, Identity: "system:manent", Action: "deployment.finish", Target: id, RequestID: id,
		Outcome: string(o.State), Detail: auditJSON(map[string]string{"error": o.Error, "rollback": o.Rollback, "sha256": o.SHA256}),
	})
}

func (s *Store) setInventory(ctx context.Context, tx *sql.Tx, app, env, column string, rel manent.Release) error {
	b, _ := json.Marshal(rel)
	// column is one of two constants, never user input.
	_, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_inventory (application, environment, `+column+`) VALUES (?, ?, ?)
		ON CONFLICT (application, environment) DO UPDATE SET `+column+` = excluded.`+column), app, env, string(b))
	return err
}

// Inventory returns every application/environment's current release and last failure.
func (s *Store) Inventory(ctx context.Context) ([]manent.InventoryEntry, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT application, environment, current, last_failure FROM manent_inventory
		WHERE current IS NOT NULL OR last_failure IS NOT NULL ORDER BY application, environment`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []manent.InventoryEntry{}
	for rows.Next() {
		var e manent.InventoryEntry
		var cur, fail sql.NullString
		if err := rows.Scan(&e.Application, &e.Environment, &cur, &fail); err != nil {
			return nil, err
		}
		e.Current = decodeRelease(cur)
		e.LastFailure = decodeRelease(fail)
		out = append(out, e)
	}
	return out, rows.Err()
}

// Current returns the current release of one application/environment, nil if none.
func (s *Store) Current(ctx context.Context, app, env string) (*manent.Release, error) {
	var cur sql.NullString
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT current FROM manent_inventory WHERE application = ? AND environment = ?`), app, env).Scan(&cur)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeRelease(cur), nil
}

func decodeRelease(s sql.NullString) *manent.Release {
	if !s.Valid || s.String == "" {
		return nil
	}
	var r manent.Release
	if json.Unmarshal([]byte(s.String), &r) != nil {
		return nil
	}
	return &r
}

const countByStateQuery = `SELECT state, COUNT(*) FROM manent_deployments GROUP BY state`

// CountByState counts deployments per state.
func (s *Store) CountByState(ctx context.Context) (map[manent.State]int, error) {
	rows, err := s.rdb.QueryContext(ctx, countByStateQuery)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[manent.State]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[manent.State(st)] = n
	}
	return out, rows.Err()
}

const successesQuery = `SELECT ` + deploymentColumns + ` FROM manent_deployments
		WHERE application = ? AND version = ? AND state = ? ORDER BY finished_at DESC`

// Successes returns where application ended SUCCESS with version: one
// entry per environment, the latest.
func (s *Store) Successes(ctx context.Context, application, version string) ([]Record, error) {
	rows, err := s.rdb.QueryContext(ctx, s.q(successesQuery), application, version, string(manent.StateSuccess))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Record
	seen := map[string]bool{}
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		if !seen[r.Environment] {
			seen[r.Environment] = true
			out = append(out, *r)
		}
	}
	return out, rows.Err()
}

const rolledBackQuery = `SELECT ` + deploymentColumns + ` FROM manent_deployments
		WHERE application = ? AND environment = ? AND state = ? AND finished_at > ? AND rollback_of IN
			(SELECT id FROM manent_deployments WHERE application = ? AND environment = ? AND version = ?)
		ORDER BY finished_at DESC, id DESC LIMIT 1`

// RolledBackSince returns the latest rollback (`manent rollback`) that
// ended SUCCESS in application/environment after since and went back from
// a deploy of version: that version's release was rolled back there. Nil
// when there is none.
func (s *Store) RolledBackSince(ctx context.Context, application, environment, version string, since time.Time) (*Record, error) {
	row := s.rdb.QueryRowContext(ctx, s.q(rolledBackQuery), application, environment, string(manent.StateSuccess), fmtTime(since),
		application, environment, version)
	r, err := scanRecord(row)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return r, err
}
