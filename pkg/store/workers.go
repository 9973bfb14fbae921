package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	// ClaimedBy is the worker that claimed this one to take it over
	// (TakeOver), until ClaimedUntil; set only while that takeover runs,
	// or after its claimer died mid-recovery (the claim is then stale).
	ClaimedBy    string
	ClaimedUntil *time.Time
	// Config is the worker's policy-relevant configuration as it recorded
	// it when it started (zero: a row of an earlier version).
	Config WorkerConfig
	// Waiting is how many of its deploys held none of its slots at its
	// last heartbeat (HeartbeatWaiting): waiting between rollout waves.
	Waiting int
}

// WorkerConfig digests a worker's policy-relevant configuration: Digest
// the whole, Parts each part by name ("governance", "rbac", …). Two
// workers with one Digest decide alike.
type WorkerConfig struct {
	Digest string
	Parts  map[string]string
}

// Differs returns the parts of c that other has otherwise (a part only one
// of them has counts), sorted; nil when the digests agree or either is
// unknown.
func (c WorkerConfig) Differs(other WorkerConfig) []string {
	if c.Digest == "" || other.Digest == "" || c.Digest == other.Digest {
		return nil
	}
	var out []string
	for k, v := range c.Parts {
		if other.Parts[k] != v {
			out = append(out, k)
		}
	}
	for k := range other.Parts {
		if _, ok := c.Parts[k]; !ok {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		out = []string{"configuration"}
	}
	slices.Sort(out)
	return out
}

// ErrWorkerDead is returned by Heartbeat when the others declared this
// worker dead (its deploys were taken over) or another process registered
// with its executor id: it must not run their steps.
var ErrWorkerDead = errors.New("this worker was declared dead (its deploys were taken over) or another process took its executor id")

// nowMs is the database clock in epoch milliseconds.
func (s *Store) nowMs() string {
	if s.postgres {
		return `(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT`
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`
}

// WorkerStart is a worker process starting (RegisterWorker).
type WorkerStart struct {
	ID, Version, AppVersion string
	// Instance is the process's own random token: Heartbeat counts only
	// for the instance that registered last.
	Instance string
	// Seat says where the process runs, for a process holding the lock
	// that makes it the only one there with this id ("": unknown). A row
	// with the same seat was left by a dead process.
	Seat string
	// DeadAfter is workers.dead_after: on PostgreSQL a row of another
	// seat that beat more recently may belong to a live process.
	DeadAfter time.Duration
	// Config is its policy-relevant configuration (Worker.Config).
	Config WorkerConfig
	// Waiting, when set, is told once that the start waits for the row's
	// previous process to fall silent: how long ago it beat, and its seat.
	Waiting func(beatAgo time.Duration, seat string)
	// Sending, when set, is called before each attempt to write the row:
	// the one that lands is the worker's first heartbeat, sent then — not
	// when RegisterWorker was called, which waits as long as dead_after.
	Sending func()
}

// ExecutorInUseError is what RegisterWorker returns when another live
// process already runs with the executor id: it beat while this one
// waited.
type ExecutorInUseError struct {
	ID   string
	Seat string // where it runs ("" when it did not say)
}

func (e *ExecutorInUseError) Error() string {
	where := ""
	if e.Seat != "" {
		where = " (" + e.Seat + ")"
	}
	return fmt.Sprintf("executor id %s is in use: another manent-server%s runs with it and is still beating; give each worker its own --executor-id (executor_id in manent-server.yaml), or stop that one first", e.ID, where)
}

// RegisterWorker records that worker w.ID starts now (alive), replacing
// what an earlier process of the same id left.
//
// On PostgreSQL an earlier process may still be alive elsewhere: a row
// listed alive that beat within w.DeadAfter (or its own dead_after, when
// longer: its lifeline stops its steps only by then), from another seat, is
// waited for — until it has been silent that long (it died: its place is
// free), or until it beats again (it lives: ExecutorInUseError). Two
// processes never run one executor's deploys together. While another
// worker takes w.ID's deploys over (its claim is live, TakeOver) it waits
// until the takeover is recorded, so DBOS recovers for this process only
// what is still its own. It gives up when ctx ends.
func (s *Store) RegisterWorker(ctx context.Context, w WorkerStart) error {
	id := w.ID
	// The previous process's place is free unless it may be alive: on
	// SQLite the database's file lock proves it is not.
	free := "TRUE"
	var parts any // NULL when unknown
	if w.Config.Parts != nil {
		b, err := json.Marshal(w.Config.Parts)
		if err != nil {
			return fmt.Errorf("register worker %s: %w", id, err)
		}
		parts = string(b)
	}
	var digest any
	if w.Config.Digest != "" {
		digest = w.Config.Digest
	}
	args := []any{id, w.Version, w.AppVersion, w.Instance, w.Seat, w.DeadAfter.Milliseconds(), digest, parts}
	if s.postgres {
		free = `(manent_workers.state <> 'alive'
			OR manent_workers.last_seen_ms < ` + s.nowMs() + ` - CASE WHEN manent_workers.dead_after_ms > ? THEN manent_workers.dead_after_ms ELSE ? END
			OR (? <> '' AND manent_workers.seat = ?))`
		args = append(args, w.DeadAfter.Milliseconds(), w.DeadAfter.Milliseconds(), w.Seat, w.Seat)
	}
	wait := 50 * time.Millisecond
	var seen *int64 // the previous process's last beat when first seen alive
	for {
		if w.Sending != nil {
			w.Sending()
		}
		res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO manent_workers (id, state, last_seen_ms, started_at_ms, version, app_version, instance, seat, dead_after_ms, config_digest, config_parts)
		VALUES (?, 'alive', `+s.nowMs()+`, `+s.nowMs()+`, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET state = 'alive', last_seen_ms = excluded.last_seen_ms,
			started_at_ms = excluded.started_at_ms, version = excluded.version, app_version = excluded.app_version,
			instance = excluded.instance, seat = excluded.seat, dead_after_ms = excluded.dead_after_ms,
			config_digest = excluded.config_digest, config_parts = excluded.config_parts,
			taken_over_ms = NULL, taken_over_by = NULL,
			claim = NULL, claimed_by = NULL, claimed_ms = NULL, claim_until_ms = NULL
		WHERE NOT (`+s.claimLive()+`) AND `+free), args...)
		if err != nil {
			return fmt.Errorf("register worker %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("register worker %s: %w", id, err)
		} else if n > 0 {
			return nil
		}
		b, err := s.LastBeat(ctx, id)
		if err != nil {
			return fmt.Errorf("register worker %s: %w", id, err)
		}
		why := fmt.Sprintf("worker %s is taking its deploys over", b.ClaimedBy)
		if b.ClaimedBy == "" && b.State == WorkerAlive {
			// Not a claim: the previous process may be alive.
			switch {
			case seen == nil:
				seen = &b.Last
				if w.Waiting != nil {
					w.Waiting(b.Ago, b.Seat)
				}
			case b.Last != *seen:
				return &ExecutorInUseError{ID: id, Seat: b.Seat}
			}
			why = fmt.Sprintf("its previous process beat %s ago and is not yet silent for %s", b.Ago.Round(time.Millisecond), w.DeadAfter)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("register worker %s: %s: %w", id, why, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// Beat is a worker's row as the database has it when it is asked
// (LastBeat).
type Beat struct {
	Found     bool   // id has a row
	State     string // alive, leaving or dead
	ClaimedBy string // the worker taking it over ("": none)
	Seat      string // where its process runs ("": unknown)
	// Last is its last heartbeat in epoch milliseconds by the database's
	// clock (compare two to see a new beat), Ago how long ago that was.
	Last int64
	Ago  time.Duration
	// DeadAfter is the worker's own workers.dead_after (0: not recorded,
	// a row of an earlier version).
	DeadAfter time.Duration
}

// LastBeat returns worker id's row as it is now (Found false: no row).
func (s *Store) LastBeat(ctx context.Context, id string) (Beat, error) {
	var b Beat
	var agoMs, deadAfterMs int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT state, COALESCE(claimed_by, ''), COALESCE(seat, ''), last_seen_ms, `+s.nowMs()+` - last_seen_ms, dead_after_ms
		FROM manent_workers WHERE id = ?`), id).Scan(&b.State, &b.ClaimedBy, &b.Seat, &b.Last, &agoMs, &deadAfterMs)
	if errors.Is(err, sql.ErrNoRows) {
		return Beat{}, nil
	}
	if err != nil {
		return Beat{}, fmt.Errorf("worker %s: %w", id, err)
	}
	b.Found, b.Ago, b.DeadAfter = true, time.Duration(agoMs)*time.Millisecond, time.Duration(deadAfterMs)*time.Millisecond
	return b, nil
}

// Heartbeat records that worker id, the process that registered as
// instance, is still alive. It fails with ErrWorkerDead once the others
// declared it dead (or it left), or another process registered with its id
// since: a worker never revives itself; it must stop and start again.
func (s *Store) Heartbeat(ctx context.Context, id, instance string) error {
	return s.HeartbeatWaiting(ctx, id, instance, 0)
}

// HeartbeatWaiting is Heartbeat that also records how many of the
// worker's deploys hold none of its slots now (Worker.Waiting).
func (s *Store) HeartbeatWaiting(ctx context.Context, id, instance string, waiting int) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE manent_workers SET last_seen_ms = `+s.nowMs()+`, waiting = ?
		WHERE id = ? AND state = 'alive' AND instance = ?`), waiting, id, instance)
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

// ForgetWorkers removes the workers taken over more than olderThan ago
// (by the database's clock) and not started again since: the list then
// holds the workers of now, not every executor id that ever ran (a worker
// per pod name, replaced at each rollout). Their deploys were taken over;
// a process still running with such an id finds no row and stops
// (ErrWorkerDead), as a worker declared dead does. It returns how many it
// removed.
func (s *Store) ForgetWorkers(ctx context.Context, olderThan time.Duration) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM manent_workers
		WHERE state = 'dead' AND taken_over_ms IS NOT NULL AND taken_over_ms < `+s.nowMs()+` - ?`), olderThan.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("forget workers taken over: %w", err)
	}
	return res.RowsAffected()
}

// LeaveWorker marks worker id leaving, when instance is the process that
// holds its row: the elected worker takes its deploys over at once, without
// waiting for dead_after.
func (s *Store) LeaveWorker(ctx context.Context, id, instance string) error {
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE manent_workers SET state = 'leaving', last_seen_ms = `+s.nowMs()+`
		WHERE id = ? AND state = 'alive' AND instance = ?`), id, instance)
	if err != nil {
		return fmt.Errorf("mark worker %s leaving: %w", id, err)
	}
	return nil
}

// DeclareDead marks dead the workers silent for more than deadAfter, or
// than their own dead_after when it is longer (by the database's clock),
// and returns them with the leaving workers not yet
// taken over: the workers whose deploys must be taken over now. The
// update is conditional, so a worker whose heartbeat lands first stays
// alive, and one declared dead never beats again (Heartbeat).
func (s *Store) DeclareDead(ctx context.Context, deadAfter time.Duration) ([]string, error) {
	// A worker configured with a longer dead_after than this one stops its
	// steps only by its own: it is waited for that long.
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE manent_workers SET state = 'dead'
		WHERE state = 'alive' AND last_seen_ms < `+s.nowMs()+` - CASE WHEN dead_after_ms > ? THEN dead_after_ms ELSE ? END`),
		deadAfter.Milliseconds(), deadAfter.Milliseconds()); err != nil {
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

// DeclareGone marks worker id dead now, whatever its last heartbeat: for a
// worker known to run nowhere (on SQLite, any worker but the server holding
// the database's lock). It reports whether id has a row not yet taken over,
// which TakeOver then claims.
func (s *Store) DeclareGone(ctx context.Context, id string) (bool, error) {
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE manent_workers SET state = 'dead'
		WHERE id = ? AND state IN ('alive', 'leaving')`), id); err != nil {
		return false, fmt.Errorf("declare worker %s gone: %w", id, err)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM manent_workers WHERE id = ? AND taken_over_ms IS NULL`), id).Scan(&n); err != nil {
		return false, fmt.Errorf("declare worker %s gone: %w", id, err)
	}
	return n > 0, nil
}

// DeclareOthersGone marks dead every worker but id still listed alive or
// leaving, and returns their ids: on SQLite the server holding the
// database's lock is its only one, so the others run nowhere, whatever
// their last heartbeat says (a server of an earlier --executor-id, killed
// or stopped).
func (s *Store) DeclareOthersGone(ctx context.Context, id string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`UPDATE manent_workers SET state = 'dead'
		WHERE id <> ? AND state IN ('alive', 'leaving') RETURNING id`), id)
	if err != nil {
		return nil, fmt.Errorf("declare other workers gone: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var w string
		if err := rows.Scan(&w); err != nil {
			return nil, fmt.Errorf("declare other workers gone: %w", err)
		}
		ids = append(ids, w)
	}
	return ids, rows.Err()
}

// claimLive is true for a manent_workers row whose takeover claim is live:
// claimed, not past claim_until_ms, and its claimer is still the alive
// process that claimed it (not dead, not leaving, not restarted since).
// Any other claim is stale: its claimer died or stalled mid-recovery, and
// another worker may claim the row again.
func (s *Store) claimLive() string {
	return `manent_workers.claim IS NOT NULL AND manent_workers.claim_until_ms >= ` + s.nowMs() + `
		AND EXISTS (SELECT 1 FROM manent_workers c WHERE c.id = manent_workers.claimed_by
			AND c.state = 'alive' AND c.started_at_ms <= manent_workers.claimed_ms)`
}

// ErrClaimLost is returned by TakeOver when recover ran but the claim
// went stale meanwhile (claimFor passed, or the claimer was declared dead)
// and another worker claimed the row, or its worker started again: the
// takeover is recorded by whoever holds the row now.
var ErrClaimLost = errors.New("the takeover claim went stale while recovery ran")

// DefaultClaimFor is TakeOver's claimFor when it is not positive.
const DefaultClaimFor = 30 * time.Second

// TakeOver takes worker id's deploys over when it is dead or leaving and
// nobody took them over yet. by is the worker taking over; it reports
// whether recover (DBOS recovery of id's executor) ran.
//
// No transaction is open while recover runs (recovery takes connections
// of its own from the same pool): one conditional UPDATE claims id's row
// for by, and commits; recover runs; a second UPDATE, conditional on the
// claim still being this call's, records the takeover and drops the claim.
// If recover fails, the claim is dropped (conditionally too) and TakeOver
// returns the error: the next pass, of this worker or another, retries.
// Of several workers taking id over at once exactly one claims it; the
// others return false. A live claim also holds off id's own process
// starting again (RegisterWorker).
//
// A claim is live for claimFor (DefaultClaimFor when not positive), and
// only while its claimer is alive: a claimer that died, left or restarted
// mid-recovery, or stalled past claimFor, leaves a stale claim, which the
// next TakeOver claims again. recover must therefore be safe to run again
// after a run that was cut short (DBOS recovery is: it re-enqueues what is
// still PENDING under id's executor).
func (s *Store) TakeOver(ctx context.Context, id, by string, claimFor time.Duration, recover func() error) (bool, error) {
	if claimFor <= 0 {
		claimFor = DefaultClaimFor
	}
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return false, fmt.Errorf("take over %s: %w", id, err)
	}
	claim := hex.EncodeToString(b[:])
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE manent_workers
		SET claim = ?, claimed_by = ?, claimed_ms = `+s.nowMs()+`, claim_until_ms = `+s.nowMs()+` + ?
		WHERE id = ? AND state IN ('dead', 'leaving') AND taken_over_ms IS NULL AND NOT (`+s.claimLive()+`)`),
		claim, by, claimFor.Milliseconds(), id)
	if err != nil {
		return false, fmt.Errorf("take over %s: claim: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("take over %s: claim: %w", id, err)
	} else if n == 0 {
		// Alive, taken over already, or another worker's claim is live.
		return false, nil
	}
	// The claim is ours: what follows runs even if ctx ends meanwhile
	// (recovery may have happened; the claim must not linger).
	after := func(query string, args ...any) (int64, error) {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		res, err := s.db.ExecContext(actx, s.q(query), args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	if err := recover(); err != nil {
		err = fmt.Errorf("take over %s: %w", id, err)
		if _, rerr := after(`UPDATE manent_workers SET claim = NULL, claimed_by = NULL, claimed_ms = NULL, claim_until_ms = NULL
			WHERE id = ? AND claim = ?`, id, claim); rerr != nil {
			err = errors.Join(err, fmt.Errorf("release the claim on %s (stale after %s): %w", id, claimFor, rerr))
		}
		return false, err
	}
	n, err := after(`UPDATE manent_workers SET state = 'dead', taken_over_ms = `+s.nowMs()+`, taken_over_by = ?,
			claim = NULL, claimed_by = NULL, claimed_ms = NULL, claim_until_ms = NULL
		WHERE id = ? AND claim = ?`, by, id, claim)
	if err != nil {
		return true, fmt.Errorf("record takeover of %s: %w", id, err)
	}
	if n == 0 {
		return true, fmt.Errorf("record takeover of %s: %w", id, ErrClaimLost)
	}
	return true, nil
}

// Workers lists every worker that ever registered, by id.
func (s *Store) Workers(ctx context.Context) ([]Worker, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, state, last_seen_ms, started_at_ms, version, app_version, taken_over_ms, taken_over_by,
			claimed_by, claim_until_ms, config_digest, config_parts, waiting
		FROM manent_workers ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	defer rows.Close()
	var out []Worker
	for rows.Next() {
		var w Worker
		var seen, started int64
		var over, until sql.NullInt64
		var by, claimedBy, digest, parts sql.NullString
		if err := rows.Scan(&w.ID, &w.State, &seen, &started, &w.Version, &w.AppVersion, &over, &by, &claimedBy, &until, &digest, &parts, &w.Waiting); err != nil {
			return nil, err
		}
		w.Config.Digest = digest.String
		if parts.Valid && json.Unmarshal([]byte(parts.String), &w.Config.Parts) != nil {
			w.Config.Parts = nil // unreadable: the digest alone compares
		}
		w.LastSeen, w.StartedAt = time.UnixMilli(seen).UTC(), time.UnixMilli(started).UTC()
		if over.Valid {
			t := time.UnixMilli(over.Int64).UTC()
			w.TakenOverAt = &t
		}
		w.TakenOverBy = by.String
		w.ClaimedBy = claimedBy.String
		if until.Valid {
			t := time.UnixMilli(until.Int64).UTC()
			w.ClaimedUntil = &t
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// WorkerTakenOver is how CountWorkersByState counts a dead worker whose
// deploys were taken over: handled, unlike a dead one still waiting for
// its takeover.
const WorkerTakenOver = "taken_over"

// CountWorkersByState counts the workers per state — alive, leaving,
// dead (declared dead, its deploys not taken over yet) and taken_over
// (WorkerTakenOver) —: one query over the small workers table, for
// /metrics at each scrape.
func (s *Store) CountWorkersByState(ctx context.Context) (map[string]int, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT CASE WHEN taken_over_ms IS NOT NULL AND state = 'dead' THEN '`+WorkerTakenOver+`' ELSE state END AS st, COUNT(*)
		FROM manent_workers GROUP BY st`)
	if err != nil {
		return nil, fmt.Errorf("count workers by state: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("count workers by state: %w", err)
		}
		out[state] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count workers by state: %w", err)
	}
	return out, nil
}
