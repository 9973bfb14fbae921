package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/pkg/version"
)

// Several workers (SPEC §11.3). Each worker records a heartbeat in
// manent_workers; on PostgreSQL the worker holding one advisory lock (the
// leader) declares dead the workers silent for DeadAfter and hands their
// PENDING deploys back to the queue through DBOS recovery; a worker that
// leaves (SIGTERM) is taken over at once.
//
// What guarantees that a deploy taken over does not run a step twice:
//   - DBOS (v1.9) stamps each execution of a workflow with an owner token
//     (owner_xid) when it is dequeued; recovery clears it. A step's result
//     is checkpointed only while the token is still the execution's, so a
//     zombie's step result and outcome are rejected (ErrConflictingWorkflowID).
//     DBOS does not check the token before running a step, though: without
//     more, a zombie would start its next step (the side effect) and only
//     lose the checkpoint.
//   - admitStep (ours) fences the zombie: before a step starts, and before a
//     finished step is recorded in manent's own tables, a worker whose last
//     successful heartbeat is older than freshFor beats synchronously. The
//     heartbeat updates only a row in state alive, and the leader's
//     declaration is a conditional update of the same row, so either the
//     beat lands first (the worker is alive and not taken over) or the
//     worker learns it was declared dead and runs nothing more: its steps
//     block until the engine stops, and the node exits (OnFenced).
//   - What remains is a pause that falls between that check and the start of
//     the step's command, longer than DeadAfter - freshFor: that step's
//     command can run a second time (its result is then rejected by DBOS).
//     Only a fencing token at the target could close it.
//
// What guarantees that a step's first attempt no longer runs when a worker
// that took it over runs it again (SPEC §11.2):
//   - a worker that dies: its lifeline stops the step's processes at once
//     (pkg/plugin/lifeline.go);
//   - a worker that lives on but is silent — paused, or cut off from the
//     database — for cutOff, which ends well before DeadAfter: its
//     lifeline's lease, renewed after each heartbeat that lands, lapses,
//     and the lifeline stops the steps' processes (SIGTERM, then SIGKILL
//     within cutOffGrace) before anyone may declare the worker dead; the
//     worker itself, when it runs, stops for good (ErrCutOff, fence): its
//     steps were stopped, and it records nothing more. A supervisor starts
//     it again; its deploys resume, here or elsewhere.
// The silence is measured from the start of the last heartbeat that
// landed, never later than the database wrote it, so the worker always
// errs on the early side.

// Defaults of workers.heartbeat and workers.dead_after.
const (
	DefaultHeartbeat = 5 * time.Second
	DefaultDeadAfter = 30 * time.Second
)

// leaderLockKey is the PostgreSQL advisory lock held by the leader.
const leaderLockKey int64 = 0x6d616e656e74_01 // "manent" 01

// ErrFenced is what OnFenced receives: the others declared this worker dead
// and took its deploys over, or another process took its executor id.
var ErrFenced = errors.New("this worker was declared dead (no heartbeat for workers.dead_after) and its deploys were taken over by another worker, or another process started with its executor id: it stops; start it again")

// ErrCutOff is what OnFenced receives when this worker's heartbeat has not
// reached the database for cutOff (PostgreSQL).
var ErrCutOff = errors.New("this worker's heartbeat has not reached the database for its cut-off (two thirds of workers.dead_after - workers.heartbeat): the other workers may take its deploys over, so its steps' processes were stopped and it stops; start it again")

// liveness is this worker's view of itself: when its heartbeat last
// landed, whether it was fenced or is draining, and the steps it runs.
type liveness struct {
	start time.Time
	// instance is this process's token in its manent_workers row
	// (store.WorkerStart): its beats count only while no other process
	// registered with its executor id.
	instance  string
	started   bool         // StartWorker ran
	lastOK    atomic.Int64 // nanoseconds since start (monotonic)
	fenced    chan struct{}
	fenceOnce sync.Once
	draining  atomic.Bool
	// active counts the deploy workflows executing here; parked those of
	// them stopped where nothing is half-recorded: waiting to start a step
	// (admitStep) or in a durable wait. A drain waits for active == parked.
	active atomic.Int64
	parked atomic.Int64
	leader atomic.Bool
	// forgotAt is when the leader last forgot the workers taken over long
	// ago (lead's goroutine only).
	forgotAt time.Time
	stop     context.CancelFunc
	done     chan struct{}
}

// DefaultForgetAfter is how long a worker taken over stays in the workers
// list (manent-server admin workers, GET /api/v1/workers) as dead before
// the leader forgets it, unless it starts again (Config.ForgetAfter 0).
const DefaultForgetAfter = 7 * 24 * time.Hour

func newLiveness() *liveness {
	return &liveness{start: time.Now(), instance: rand.Text(), fenced: make(chan struct{}), done: make(chan struct{})}
}

// now is the time since the worker started (monotonic).
func (l *liveness) now() time.Duration { return time.Since(l.start) }

func (l *liveness) sinceOK() time.Duration {
	return l.now() - time.Duration(l.lastOK.Load())
}

func (l *liveness) isFenced() bool {
	select {
	case <-l.fenced:
		return true
	default:
		return false
	}
}

// freshFor is how old the last heartbeat may be for a step to start without
// asking the database first.
func (e *Engine) freshFor() time.Duration {
	return min(2*e.cfg.Heartbeat, e.cfg.DeadAfter/2)
}

// cutOff is how long this worker may go without a heartbeat landing
// before it stops (PostgreSQL): two thirds of the time between its last
// heartbeat and the first instant another worker may declare it dead, and
// at least two heartbeats. 30 s and 5 s (the defaults): 16.7 s.
func (e *Engine) cutOff() time.Duration {
	return max((e.cfg.DeadAfter-e.cfg.Heartbeat)*2/3, 2*e.cfg.Heartbeat)
}

// cutOffGrace is what the steps' processes get between SIGTERM and SIGKILL
// when the worker is cut off: the step grace, shortened so that they are
// gone a heartbeat before DeadAfter.
func (e *Engine) cutOffGrace() time.Duration {
	return max(min(plugin.DefaultGrace, e.cfg.DeadAfter-e.cfg.Heartbeat-e.cutOff()), 0)
}

// canBeCutOff says whether others may take this worker's deploys over
// while it lives: several workers share a PostgreSQL database; a SQLite
// database has one server.
func (e *Engine) canBeCutOff() bool { return e.st.Postgres() }

// beatLanded records a heartbeat sent at sent (liveness.now) that landed,
// and renews the lifeline's lease. It fences the worker instead when the
// silence before it reached cutOff: the lease lapsed, and the lifeline may
// have stopped the steps' processes.
func (e *Engine) beatLanded(sent time.Duration) {
	if e.canBeCutOff() && sent-time.Duration(e.live.lastOK.Load()) >= e.cutOff() {
		e.fence(ErrCutOff)
		return
	}
	e.live.lastOK.Store(int64(sent))
	if e.canBeCutOff() && e.cfg.Lease != nil {
		e.cfg.Lease(e.cutOff()-e.live.sinceOK(), e.cutOffGrace())
	}
}

// cutOffNow fences the worker when its silence has reached cutOff.
func (e *Engine) cutOffNow() bool {
	if !e.canBeCutOff() || e.live.sinceOK() < e.cutOff() {
		return false
	}
	e.fence(ErrCutOff)
	return true
}

// watchCutOff fences the worker as soon as its silence reaches cutOff,
// whatever its heartbeat call is waiting on.
func (e *Engine) watchCutOff(ctx context.Context) {
	t := time.NewTicker(min(max(e.cfg.Heartbeat/4, 10*time.Millisecond), time.Second))
	defer t.Stop()
	for !e.live.isFenced() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.cutOffNow()
		}
	}
}

// fence stops this worker for good: no step starts any more, and OnFenced
// is told why (the node stops the engine and exits).
func (e *Engine) fence(why error) {
	e.live.fenceOnce.Do(func() {
		close(e.live.fenced)
		msg := "fenced: this worker was declared dead and its deploys were taken over; running nothing more"
		if errors.Is(why, ErrCutOff) {
			msg = "cut off: no heartbeat of this worker has reached the database for its cut-off (two thirds of workers.dead_after - workers.heartbeat); its steps' processes are stopped and it runs nothing more, so that none runs twice when another worker takes its deploys over"
		}
		e.log.Error(msg, "executor_id", e.cfg.ExecutorID, "silent_for", e.live.sinceOK().Round(time.Millisecond).String(),
			"cut_off", e.cutOff().String(), "dead_after", e.cfg.DeadAfter.String())
		if e.cfg.OnFenced != nil {
			go e.cfg.OnFenced(why)
		}
	})
}

// admitStep returns nil when this worker may run (or record) a step now: it
// is not fenced, not draining, and its heartbeat is fresh or lands now.
// Otherwise it blocks until ctx ends (the engine stops) and returns ctx's
// error, which DBOS treats as an interruption: nothing is recorded.
func (e *Engine) admitStep(ctx context.Context) error {
	return e.checkAlive(ctx, true)
}

// mayRecord is admitStep for the end of a step that ran: a draining worker
// records it (the drain waits for it), a fenced one does not.
func (e *Engine) mayRecord(ctx context.Context) error {
	return e.checkAlive(ctx, false)
}

func (e *Engine) checkAlive(ctx context.Context, starting bool) error {
	if e.live == nil {
		return nil
	}
	for {
		if e.live.isFenced() || e.cutOffNow() || (starting && e.live.draining.Load()) {
			e.live.parked.Add(1)
			<-ctx.Done()
			e.live.parked.Add(-1)
			return ctx.Err()
		}
		if e.live.sinceOK() < e.freshFor() {
			return nil
		}
		sent := e.live.now()
		err := e.st.HeartbeatWaiting(ctx, e.cfg.ExecutorID, e.live.instance, int(e.live.parked.Load()))
		switch {
		case err == nil:
			e.beatLanded(sent)
			continue // fenced if it came too late
		case errors.Is(err, store.ErrWorkerDead):
			e.fence(ErrFenced)
			continue
		}
		// The database does not answer: nothing could be recorded anyway;
		// wait and ask again.
		e.log.Warn("heartbeat before a step failed; waiting", "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(e.cfg.Heartbeat):
		}
	}
}

// mayWrite says whether this worker may still write what its steps do:
// false once it is fenced or cut off (its deploys are, or may be,
// another's).
func (e *Engine) mayWrite() bool {
	return e.live == nil || !(e.live.isFenced() || e.cutOffNow())
}

// deployStarted and deployEnded count the deploy workflows executing here;
// parked wraps a durable wait (an observation time, a wave's approval or
// freeze): nothing is half-recorded while a workflow waits there.
//
// While it waits, a deploy holds no worker slot (workers.slots): fn leaves
// it (dbos.LeaveWorkerSlot) right before it waits, and parked takes one
// again before the deploy goes on, waiting while every slot is taken — so
// deploys waiting for approvals do not starve the other environments'
// deploys, and no more deploys run at once than slots. The deploy keeps its
// environment all along (it stays PENDING in its partition).
func (e *Engine) deployStarted() { e.live.active.Add(1) }

func (e *Engine) deployEnded() { e.live.active.Add(-1) }

// parked runs fn, a durable wait of deploy r before or in wave, that
// leaves its worker slot, then takes a slot back. When every slot is
// taken, the deploy's reason says so while it waits — "waiting for a free
// worker slot on w1 (workers.slots 4) to start wave rest", next saying
// what comes. The write is no DBOS step (a step added here would change
// the recorded step sequence of deploys in flight): it is made, best
// effort, inside TakeWorkerSlot's wait, and nothing of the workflow
// depends on it. Once the deploy goes on, the reasons of its waits are
// cleared: this one, the observation's and the freeze's (written in their
// steps), and one a worker that stopped during such a wait left behind.
func (r *run) parked(ctx dbos.Context, wave string, next func() string, fn func() error) error {
	e := r.e
	e.live.parked.Add(1)
	defer e.live.parked.Add(-1)
	err := fn()
	terr := dbos.TakeWorkerSlotOrSay(ctx, func() {
		if !e.mayWrite() {
			return
		}
		why := fmt.Sprintf("%s %s (workers.slots %d) %s", slotWaitPrefix, e.cfg.ExecutorID, e.cfg.Slots, next())
		if _, err := e.st.SetState(ctx, r.in.ID, manent.StatePending, why); err != nil {
			e.log.Warn("say a deploy waits for a worker slot", "deploy", r.in.ID, "error", err)
		}
	})
	if err == nil {
		err = terr
	}
	if terr == nil && e.mayWrite() {
		if _, err := e.st.ClearReason(ctx, r.in.ID, slotWaitPrefix, observedPrefix(wave), frozenPrefix(wave)); err != nil {
			e.log.Warn("clear the reason of a deploy's wait", "deploy", r.in.ID, "error", err)
		}
	}
	return err
}

// slotWaitPrefix starts the reason of a deploy waiting, between waves, to
// take a worker slot back (run.parked).
const slotWaitPrefix = "waiting for a free worker slot on"

// StartWorker registers this worker and starts its heartbeat (and, on
// PostgreSQL, the leader election and takeovers); Launch does it first if
// it was not done. On PostgreSQL it waits while another process may still
// run with this executor id, and fails with *store.ExecutorInUseError when
// one does (store.RegisterWorker): call it before touching anything that
// process owns, such as its steps' processes.
func (e *Engine) StartWorker(ctx context.Context) error {
	if e.live.started {
		return nil
	}
	// The first beat is the registration's write that lands, sent after
	// any wait for another process's silence: a time taken before the wait
	// read it as this worker's silence, past its cut-off after 16.7 s.
	var sent time.Duration
	err := e.st.RegisterWorker(ctx, store.WorkerStart{
		ID: e.cfg.ExecutorID, Version: version.Version, AppVersion: WorkflowVersion,
		Instance: e.live.instance, Seat: e.cfg.Seat, DeadAfter: e.cfg.DeadAfter, Config: e.cfg.Settings,
		Sending: func() { sent = e.live.now() },
		Waiting: func(ago time.Duration, seat string) {
			e.log.Warn("another process ran with this executor id recently: waiting until it has been silent for workers.dead_after before taking its place (if it is still running, this one stops)",
				"executor_id", e.cfg.ExecutorID, "last_heartbeat_ago", ago.Round(time.Millisecond).String(), "its_seat", seat, "dead_after", e.cfg.DeadAfter.String())
		},
	})
	if err != nil {
		return err
	}
	e.live.started = true
	e.warnConfigDiffers(ctx)
	e.live.lastOK.Store(int64(sent)) // the first beat: no silence before it
	e.beatLanded(sent)
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.live.stop = cancel
	go e.workerLoop(wctx)
	if e.canBeCutOff() {
		go e.watchCutOff(wctx)
	}
	return nil
}

func (e *Engine) workerLoop(ctx context.Context) {
	defer close(e.live.done)
	// Leading runs beside the heartbeat, never before it: a takeover that
	// takes long must not leave this worker silent past its cut-off.
	var leading sync.WaitGroup
	if e.st.Postgres() {
		leading.Go(func() { e.leaderLoop(ctx) })
	}
	defer leading.Wait()
	t := time.NewTicker(e.cfg.Heartbeat)
	defer t.Stop()
	for {
		if !e.live.isFenced() {
			// Bounded on PostgreSQL: a connection that hangs (a network
			// cut) must not hold the beats that would land once it heals.
			// A busy SQLite answers late but surely: its beat waits.
			hctx, cancel := context.WithCancel(ctx)
			if e.canBeCutOff() {
				hctx, cancel = context.WithTimeout(ctx, max(e.cfg.Heartbeat, time.Second))
			}
			sent := e.live.now()
			err := e.st.HeartbeatWaiting(hctx, e.cfg.ExecutorID, e.live.instance, int(e.live.parked.Load()))
			cancel()
			switch {
			case err == nil:
				e.beatLanded(sent)
			case errors.Is(err, store.ErrWorkerDead):
				if !e.live.draining.Load() {
					e.fence(ErrFenced)
				}
			case ctx.Err() == nil:
				e.warnBeatFailed(err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// warnBeatFailed says that a heartbeat did not land, and what the silence
// means on this database: on PostgreSQL the worker stops at its cut-off
// (the others may take its deploys over); on SQLite it has none — the
// server holds the database's lock, no other worker takes its deploys, and
// it goes on until a beat lands.
func (e *Engine) warnBeatFailed(err error) {
	silent := e.live.sinceOK().Round(time.Millisecond).String()
	if e.canBeCutOff() {
		e.log.Warn("heartbeat failed", "error", err, "silent_for", silent, "cut_off", e.cutOff().String())
		return
	}
	e.log.Warn("heartbeat failed", "error", err, "silent_for", silent,
		"meaning", "SQLite: this server holds the database's lock, so no other worker takes its deploys over and it has no cut-off; it goes on, and its next heartbeat tries again")
}

// leaderLoop keeps or tries to take the leader lock every heartbeat, and
// as leader takes the dead and leaving workers over (PostgreSQL), while
// this worker is neither fenced nor draining.
func (e *Engine) leaderLoop(ctx context.Context) {
	var lead *pgxpool.Conn
	defer func() {
		if lead != nil {
			_ = lead.Conn().Close(context.Background())
			lead.Release()
		}
	}()
	t := time.NewTicker(e.cfg.Heartbeat)
	defer t.Stop()
	for {
		if !e.live.isFenced() && !e.live.draining.Load() {
			lead = e.lead(ctx, lead)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// lead keeps or tries to take the leader lock, and as leader takes over
// the workers that died or left. It returns the lock's connection (nil:
// not the leader).
func (e *Engine) lead(ctx context.Context, conn *pgxpool.Conn) *pgxpool.Conn {
	drop := func() *pgxpool.Conn {
		if conn != nil {
			_ = conn.Conn().Close(context.Background())
			conn.Release()
		}
		if e.live.leader.Swap(false) {
			e.log.Info("no longer the leader", "executor_id", e.cfg.ExecutorID)
		}
		return nil
	}
	if conn != nil {
		// The session holds the lock; if PostgreSQL ended it (this process
		// was paused past idle_session_timeout), the lock is gone.
		if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
			return drop()
		}
	} else {
		c, err := e.st.Pool().Acquire(ctx)
		if err != nil {
			return nil
		}
		// A leader paused (SIGSTOP, a stall) keeps its session, hence the
		// lock: PostgreSQL ends a session idle for longer than this, so
		// another worker becomes leader.
		idle := max(e.cfg.DeadAfter/2, 2*e.cfg.Heartbeat)
		var got bool
		if _, err := c.Exec(ctx, fmt.Sprintf("SET idle_session_timeout = %d", idle.Milliseconds())); err == nil {
			err = c.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", leaderLockKey).Scan(&got)
		}
		if !got {
			_, _ = c.Exec(ctx, "SET idle_session_timeout = 0")
			c.Release()
			return nil
		}
		conn = c
		e.live.leader.Store(true)
		e.log.Info("elected leader: watching the other workers", "executor_id", e.cfg.ExecutorID)
	}
	ids, err := e.st.DeclareDead(ctx, e.cfg.DeadAfter)
	if err != nil {
		e.log.Warn("look for dead workers", "error", err)
		return conn
	}
	for _, id := range ids {
		if id == e.cfg.ExecutorID {
			continue
		}
		// A worker that left (SIGTERM) is handed over as planned: only one
		// that crashed or fell silent is worth a warning. Read for the log
		// line alone: a row leaving becomes nothing but dead or alive (a
		// restart, which TakeOver then refuses).
		left := false
		if b, err := e.st.LastBeat(ctx, id); err == nil && b.State == store.WorkerLeaving {
			left = true
		}
		var recovered []string
		start := time.Now()
		// The claim lasts DeadAfter: recovery is one UPDATE of DBOS's
		// table; a leader that stalls longer than that, or dies, leaves
		// the takeover to the next leader.
		ok, err := e.st.TakeOver(ctx, id, e.cfg.ExecutorID, e.cfg.DeadAfter, func() error {
			var err error
			recovered, err = e.Recover([]string{id})
			return err
		})
		switch {
		case err != nil:
			e.log.Error("take over a dead worker", "worker", id, "error", err)
		case ok && left:
			e.takenOverLeft.Add(1)
			e.log.Info("took over a worker that left (stopped on purpose): its running deploys are back in the queue",
				"worker", id, "deploys", recovered, "took", time.Since(start))
		case ok:
			e.takenOverDead.Add(1)
			e.log.Warn("took over a dead worker: its running deploys are back in the queue",
				"worker", id, "deploys", recovered, "took", time.Since(start))
		}
	}
	// Once an hour (or ForgetAfter, when shorter), the workers taken
	// over longer than ForgetAfter ago leave the list.
	after := cmp.Or(e.cfg.ForgetAfter, DefaultForgetAfter)
	if time.Since(e.live.forgotAt) >= min(after, time.Hour) {
		if n, err := e.st.ForgetWorkers(ctx, after); err != nil {
			e.log.Warn("forget the workers taken over long ago", "error", err)
		} else {
			e.live.forgotAt = time.Now()
			if n > 0 {
				e.log.Info("forgot the workers taken over longer ago than workers.forget_after", "workers", n, "forget_after", after)
			}
		}
	}
	return conn
}

// TakeOvers returns how many workers this engine took over as leader since
// it started (PostgreSQL): dead, those that crashed or fell silent past
// workers.dead_after, and left, those that stopped on purpose (SIGTERM).
// Each counts once, as its "took over …" line is logged: a takeover that
// failed, or that another worker made, does not count; nor does Adopt
// (SQLite's start) or Recover (`admin recover`). /metrics reports them
// (manent_worker_takeovers_total).
func (e *Engine) TakeOvers() (dead, left int64) {
	return e.takenOverDead.Load(), e.takenOverLeft.Load()
}

// drain stops taking deploys and starts no new step; it waits (for at
// most timeout) until every deploy executing here is parked: waiting to
// start a step, or in a durable wait. A step that ran is then recorded
// (DBOS checkpoints it before the workflow reaches its next step), so
// cancelling the workflows loses nothing and re-runs nothing.
func (e *Engine) drain(timeout time.Duration) {
	e.live.draining.Store(true)
	// Listen to no deploy queue: the queue runner stops dequeuing.
	dbos.ListenQueues(e.dbos, "manent-draining")
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for e.live.active.Load() > e.live.parked.Load() {
		if time.Now().After(deadline) {
			e.log.Warn("steps still running after the drain timeout; they are interrupted and resumed elsewhere",
				"deploys", e.live.active.Load()-e.live.parked.Load())
			return
		}
		<-tick.C
	}
}

// stopWorker stops the heartbeat; unless fenced, the worker is marked
// leaving so the leader takes its deploys over at once.
func (e *Engine) stopWorker() {
	if e.live == nil || e.live.stop == nil {
		return
	}
	e.live.stop()
	<-e.live.done
	if e.live.isFenced() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.st.LeaveWorker(ctx, e.cfg.ExecutorID, e.live.instance); err != nil {
		e.log.Warn("mark this worker leaving", "error", err)
	}
}

// here names this worker in a message that depends on its configuration:
// "worker <executor id>" when several workers share the database
// (PostgreSQL), whose configurations may differ, else "this server".
func (e *Engine) here() string {
	if e.st.Postgres() {
		return "worker " + e.cfg.ExecutorID
	}
	return "this server"
}

// warnConfigDiffers logs, once at start, the live workers whose
// policy-relevant configuration differs from this one's: a deploy
// submitted through one of them and run by this one (or the reverse) is
// decided by two policies — its config step refuses it when this worker's
// governance wants an approval it did not get, or a plugin this worker
// does not allow.
func (e *Engine) warnConfigDiffers(ctx context.Context) {
	ws, err := e.st.Workers(ctx)
	if err != nil {
		e.log.Warn("compare this worker's configuration with the others'", "error", err)
		return
	}
	self := store.Worker{ID: e.cfg.ExecutorID, State: store.WorkerAlive, Config: e.cfg.Settings}
	if note := e.configNote(self, ws); note != "same" && note != "unknown" {
		e.log.Warn("this worker's configuration differs from live workers' (governance, rbac, auth, plugins.steps, allow-lists or workflow version): deploys submitted through one worker and run by another may be refused at their config step, or decided otherwise; give every worker the same configuration (manent-server admin workers shows which differ)",
			"executor_id", e.cfg.ExecutorID, "config", note, "config_digest", e.cfg.Settings.Digest)
	}
}

// configNote compares w's configuration with the live workers' other than
// w: "same", "differs from w1, w2 (governance, rbac)", or "unknown" (w was
// started by an earlier version, which recorded none).
func (e *Engine) configNote(w store.Worker, all []store.Worker) string {
	if w.Config.Digest == "" {
		return "unknown"
	}
	var ids, parts []string
	for _, o := range all {
		if o.ID == w.ID || o.State != store.WorkerAlive || o.TakenOverAt != nil || time.Since(o.LastSeen) > e.cfg.DeadAfter {
			continue
		}
		d := w.Config.Differs(o.Config)
		if len(d) == 0 {
			continue
		}
		ids = append(ids, o.ID)
		for _, p := range d {
			if !slices.Contains(parts, p) {
				parts = append(parts, p)
			}
		}
	}
	if len(ids) == 0 {
		return "same"
	}
	slices.Sort(parts)
	return fmt.Sprintf("differs from %s (%s)", strings.Join(ids, ", "), strings.Join(parts, ", "))
}

// Fenced is closed when this worker was declared dead.
func (e *Engine) Fenced() <-chan struct{} { return e.live.fenced }

// Leader reports whether this worker holds the leader lock.
func (e *Engine) Leader() bool { return e.live != nil && e.live.leader.Load() }

// Workers lists the workers with the number of deploys each runs.
func (e *Engine) Workers(ctx context.Context) ([]WorkerInfo, error) {
	ws, err := e.st.Workers(ctx)
	if err != nil {
		return nil, err
	}
	running := map[string]int{}
	pending, err := e.pending(dbos.WithFilterName(DeployWorkflow))
	if err != nil {
		return nil, fmt.Errorf("list running deploys: %w", err)
	}
	for _, p := range pending {
		running[p.ExecutorID]++
	}
	out := make([]WorkerInfo, len(ws))
	for i, w := range ws {
		// Of its PENDING deploys, those that held no slot at its last
		// heartbeat wait; the others run. This worker counts its own now.
		waiting := w.Waiting
		if w.ID == e.cfg.ExecutorID && e.live != nil && e.live.started {
			waiting = int(e.live.parked.Load())
		}
		w.Waiting = min(max(waiting, 0), running[w.ID])
		out[i] = WorkerInfo{Worker: w, Running: running[w.ID] - w.Waiting, ConfigNote: e.configNote(w, ws)}
	}
	return out, nil
}

// pending lists the running (PENDING) workflows that match opts, without
// their inputs and outputs, which a launched DBOS would otherwise read and
// decode: the callers need ids, executors and versions only.
func (e *Engine) pending(opts ...dbos.ListWorkflowsOption) ([]dbos.WorkflowStatus, error) {
	return dbos.ListWorkflows(e.dbos, append(opts, dbos.WithFilterStatus(dbos.WorkflowStatusPending),
		dbos.WithFilterLoadInput(false), dbos.WithFilterLoadOutput(false))...)
}

// WorkerInfo is a worker and its deploys (PENDING in DBOS under its
// executor id): Running those that hold one of its slots (at most
// workers.slots), Waiting (store.Worker's, bounded here) those that hold
// none — waiting between rollout waves for an approval, a freeze, an
// observation, or for a slot back.
type WorkerInfo struct {
	store.Worker
	Running int
	// ConfigNote compares its configuration with the live workers'
	// (configNote).
	ConfigNote string
}

// OrphanExecutors returns the executor ids other than this worker's under
// which DBOS holds running (PENDING) workflows of this workflow version
// (older versions' are left to their own workers, docs/operations.md
// "Upgrades"). On SQLite, where this server is the database's only one
// (the lock beside the file), they run nowhere: a server of another
// executor id (an earlier --executor-id) died or stopped with them. See
// Adopt.
func (e *Engine) OrphanExecutors(ctx context.Context) ([]string, error) {
	pending, err := e.pending()
	if err != nil {
		return nil, fmt.Errorf("list running workflows: %w", err)
	}
	var ids []string
	for _, p := range pending {
		if p.ExecutorID != "" && p.ExecutorID != e.cfg.ExecutorID && p.ApplicationVersion == WorkflowVersion && !slices.Contains(ids, p.ExecutorID) {
			ids = append(ids, p.ExecutorID)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Adopt takes over the running deploys of executor id, which must run
// nowhere (OrphanExecutors; the processes of its steps stopped): it is
// declared dead and its workflows are recovered here, each deploy resuming
// from its last completed step, as after a takeover on PostgreSQL
// (SPEC §11.3). It returns the workflows recovered.
func (e *Engine) Adopt(ctx context.Context, id string) ([]string, error) {
	if id == e.cfg.ExecutorID {
		return nil, fmt.Errorf("adopt %s: it is this worker", id)
	}
	registered, err := e.st.DeclareGone(ctx, id)
	if err != nil {
		return nil, err
	}
	var recovered []string
	recoverAll := func() error {
		var err error
		recovered, err = e.Recover([]string{id})
		return err
	}
	if !registered {
		// No worker row to record the takeover in (an executor of an
		// admin command, or already marked taken over): recover only.
		return recovered, recoverAll()
	}
	ok, err := e.st.TakeOver(ctx, id, e.cfg.ExecutorID, e.cfg.DeadAfter, recoverAll)
	if err == nil && !ok {
		// A claim of a takeover that never finished, made by an executor
		// that is no more alive than id (nothing else runs here): recover
		// anyway; the row stays as it is.
		err = recoverAll()
	}
	return recovered, err
}

// Requeued returns, for each deploy that DBOS holds back in the deploy
// queue (ENQUEUED) after it ran — taken over from a worker that died or
// left, whose executor id recovery keeps — that worker. Such a deploy is
// PENDING in manent's tables, its interrupted step listed running, while
// no step of it runs: it waits for a free worker slot. Deploys that never
// ran are not asked for (their state is ENQUEUED already); the caller
// looks up only its PENDING ones.
//
// ids, when given, narrows the question to those deploys (one status page
// asks about one deploy, not the whole queue).
func (e *Engine) Requeued(ctx context.Context, ids ...string) (map[string]string, error) {
	opts := []dbos.ListWorkflowsOption{dbos.WithFilterName(DeployWorkflow), dbos.WithFilterStatus(dbos.WorkflowStatusEnqueued),
		dbos.WithFilterLoadInput(false), dbos.WithFilterLoadOutput(false)}
	if len(ids) > 0 {
		opts = append(opts, dbos.WithFilterWorkflowIDs(ids...))
	}
	ws, err := dbos.ListWorkflows(e.dbos, opts...)
	if err != nil {
		return nil, fmt.Errorf("list queued deploys: %w", err)
	}
	out := make(map[string]string, len(ws))
	for _, w := range ws {
		out[w.ID] = w.ExecutorID
	}
	return out, nil
}

// OnDeadWorkers returns, for each running (PENDING) deploy whose worker is
// dead or silent for DeadAfter and not yet taken over, that worker: the
// deploy waits for a takeover (SPEC §11.3).
func (e *Engine) OnDeadWorkers(ctx context.Context) (map[string]store.Worker, error) {
	return e.onSilentWorkers(ctx, DeployWorkflow, e.cfg.DeadAfter)
}

// GatesOnSilentWorkers returns, for each waiting deploy (DELAYED,
// WAITING_DEPENDENCY, AWAITING_APPROVAL) whose gate runs on a worker not
// taken over yet that is dead, leaving, or silent for longer than two
// heartbeats, that worker. Nothing updates such a deploy's reason until
// another worker resumes its gate: what it says ("approvals 0/1", the
// start time) may be stale.
func (e *Engine) GatesOnSilentWorkers(ctx context.Context) (map[string]store.Worker, error) {
	gates, err := e.onSilentWorkers(ctx, GateWorkflow, min(2*e.cfg.Heartbeat, e.cfg.DeadAfter))
	if err != nil {
		return nil, err
	}
	out := make(map[string]store.Worker, len(gates))
	for id, w := range gates {
		out[strings.TrimSuffix(id, ".gate")] = w
	}
	return out, nil
}

// onSilentWorkers maps each running (PENDING) workflow named name whose
// worker is not taken over yet and is dead, leaving or silent for longer
// than silent, to that worker.
func (e *Engine) onSilentWorkers(ctx context.Context, name string, silent time.Duration) (map[string]store.Worker, error) {
	ws, err := e.st.Workers(ctx)
	if err != nil {
		return nil, err
	}
	gone := map[string]store.Worker{}
	var ids []string
	// On SQLite every other worker is gone: this server holds the
	// database's lock.
	sqlite := !e.st.Postgres()
	for _, w := range ws {
		dead := w.State != store.WorkerAlive || time.Since(w.LastSeen) > silent || (sqlite && w.ID != e.cfg.ExecutorID)
		// A gate here is not waited on: this worker answers.
		if w.TakenOverAt == nil && dead && (name == DeployWorkflow || w.ID != e.cfg.ExecutorID) {
			gone[w.ID] = w
			ids = append(ids, w.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	pending, err := e.pending(dbos.WithFilterName(name), dbos.WithFilterExecutorIDs(ids...))
	if err != nil {
		return nil, fmt.Errorf("list workflows on dead workers: %w", err)
	}
	out := map[string]store.Worker{}
	for _, p := range pending {
		out[p.ID] = gone[p.ExecutorID]
	}
	return out, nil
}
