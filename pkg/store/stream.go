package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// commitHooks collects the events appended by each open transaction of
// Store.Tx and hands them to the OnCommit listeners once it has committed.
// With no listener it costs one atomic load per transaction.
type commitHooks struct {
	fns     atomic.Pointer[[]*commitHook]
	mu      sync.Mutex
	pending map[*sql.Tx][]Event
}

type commitHook struct{ fn func([]Event) }

func (h *commitHooks) active() bool {
	p := h.fns.Load()
	return p != nil && len(*p) > 0
}

// begin starts collecting tx's events.
func (h *commitHooks) begin(tx *sql.Tx) {
	if !h.active() {
		return
	}
	h.mu.Lock()
	if h.pending == nil {
		h.pending = map[*sql.Tx][]Event{}
	}
	h.pending[tx] = nil
	h.mu.Unlock()
}

// record adds an event appended in tx; a transaction not begun through
// Store.Tx is ignored (readers still find its events in the table).
func (h *commitHooks) record(tx *sql.Tx, e Event) {
	if !h.active() {
		return
	}
	h.mu.Lock()
	if evs, ok := h.pending[tx]; ok {
		h.pending[tx] = append(evs, e)
	}
	h.mu.Unlock()
}

// end stops collecting tx's events and, when it committed, calls the
// listeners with them.
func (h *commitHooks) end(tx *sql.Tx, committed bool) {
	h.mu.Lock()
	evs, ok := h.pending[tx]
	if ok {
		delete(h.pending, tx)
	}
	h.mu.Unlock()
	if !committed || len(evs) == 0 {
		return
	}
	if p := h.fns.Load(); p != nil {
		for _, c := range *p {
			c.fn(evs)
		}
	}
}

// OnCommit registers fn to receive the events each transaction appended, in
// order, right after the transaction committed: they are visible to every
// reader by then. fn runs on the committing goroutine — often a deploy step
// — so it must never block. Events written by another process, or outside
// Store.Tx, are not seen: readers that must see everything also poll
// (Heads). The returned function removes fn.
func (s *Store) OnCommit(fn func([]Event)) (remove func()) {
	h := &commitHook{fn: fn}
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	var cur []*commitHook
	if p := s.hooks.fns.Load(); p != nil {
		cur = *p
	}
	next := append(append([]*commitHook(nil), cur...), h)
	s.hooks.fns.Store(&next)
	return func() {
		s.hooks.mu.Lock()
		defer s.hooks.mu.Unlock()
		var cur []*commitHook
		if p := s.hooks.fns.Load(); p != nil {
			cur = *p
		}
		next := make([]*commitHook, 0, len(cur))
		for _, c := range cur {
			if c != h {
				next = append(next, c)
			}
		}
		s.hooks.fns.Store(&next)
	}
}

// Head is where a deploy's event log ends, with what a stream needs to
// authorise and describe it.
type Head struct {
	ID          string
	Application string
	Environment string
	State       manent.State
	Reason      string
	CreatedAt   time.Time
	// LastSeq is the seq of the deploy's last event.
	LastSeq int64
}

// headsQuery is Heads' query ("" when it selects nothing). Each branch of
// its OR has an index (the EXPLAIN test).
func headsQuery(ids []string, unfinished bool, since time.Time) (string, []any) {
	var where []string
	var args []any
	if len(ids) > 0 {
		ph := make([]string, len(ids))
		for i, id := range ids {
			ph[i] = "?"
			args = append(args, id)
		}
		where = append(where, "id IN ("+strings.Join(ph, ",")+")")
	}
	if unfinished {
		where = append(where, "state IN ("+unfinishedStates()+")")
	}
	if !since.IsZero() {
		where = append(where, "created_at >= ?")
		args = append(args, fmtTime(since))
	}
	if len(where) == 0 {
		return "", nil
	}
	// The last event's seq from the events' primary key (next_seq is not
	// kept on SQLite: events.go).
	return `SELECT id, application, environment, state, reason, created_at,
		COALESCE((SELECT MAX(e.seq) FROM manent_events e WHERE e.deployment_id = manent_deployments.id), 0)
		FROM manent_deployments WHERE ` + strings.Join(where, " OR ") + ` ORDER BY created_at, id`, args
}

// Heads returns the heads of the deploys named in ids, plus every unfinished
// deploy when unfinished is true, plus those created at or after since
// (unless since is zero), oldest first.
func (s *Store) Heads(ctx context.Context, ids []string, unfinished bool, since time.Time) ([]Head, error) {
	query, args := headsQuery(ids, unfinished, since)
	if query == "" {
		return nil, nil
	}
	rows, err := s.rdb.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("event heads: %w", err)
	}
	defer rows.Close()
	var out []Head
	for rows.Next() {
		var h Head
		var created string
		if err := rows.Scan(&h.ID, &h.Application, &h.Environment, &h.State, &h.Reason, &created, &h.LastSeq); err != nil {
			return nil, err
		}
		if t := parseTime(sql.NullString{String: created, Valid: true}); t != nil {
			h.CreatedAt = *t
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// unfinishedStates is the SQL list of the states that are not final.
func unfinishedStates() string { return statesSQL(false) }

// statesSQL is the SQL list of the final states, or of the others.
func statesSQL(final bool) string {
	var states []string
	for _, st := range manent.States {
		if st.Final() == final {
			states = append(states, "'"+string(st)+"'")
		}
	}
	return strings.Join(states, ",")
}

const queueQuery = `SELECT ` + deploymentColumns + ` FROM manent_deployments
		WHERE application = ? AND environment = ? AND state IN (?, ?)
		ORDER BY CASE WHEN state = ? THEN 0 ELSE 1 END, created_at, id`

// Queue returns the deploys of one application/environment that run
// (PENDING) or wait in its partition of the queue (ENQUEUED), in the order
// the queue serves them: running first, then by submission.
func (s *Store) Queue(ctx context.Context, app, env string) ([]Record, error) {
	rows, err := s.rdb.QueryContext(ctx, s.q(queueQuery),
		app, env, string(manent.StatePending), string(manent.StateEnqueued), string(manent.StatePending))
	if err != nil {
		return nil, fmt.Errorf("queue of %s/%s: %w", app, env, err)
	}
	return scanRecords(rows)
}
