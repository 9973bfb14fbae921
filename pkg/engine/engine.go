package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite" // SQLite system database
	"github.com/dbos-inc/dbos-transact-golang/dbos/internals"

	"github.com/manent-io/manent/pkg/admit"
	"github.com/manent-io/manent/pkg/artifact"
	"github.com/manent-io/manent/pkg/itsm"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/notify"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/pkg/urlpolicy"
)

// WorkflowVersion pins DBOS's application version. Change it only when the
// workflow code changes incompatibly: every value strands the PENDING and
// ENQUEUED deploys of the others (DBOS-NOTES sharp edge 2).
const WorkflowVersion = "manent-wf-2"

// Names of what the engine registers with DBOS.
const (
	QueueName        = "manent-deploys"
	DeployWorkflow   = "manent.deploy"
	appName          = "manent"
	defaultSlots     = 4
	defaultRecovery  = 10
	defaultQueuePoll = 100 * time.Millisecond
	// dbosRecoveryBackstop is how often DBOS resumes a deploy workflow
	// before it stops (MAX_RECOVERY_ATTEMPTS_EXCEEDED, concluded by the
	// sweeper).
	dbosRecoveryBackstop = 100
)

// Config configures the engine.
type Config struct {
	ExecutorID string
	// Slots is the number of deploys this worker runs at once (workers.slots).
	Slots int
	// DataDir holds the work directories (<DataDir>/work/<id>).
	DataDir string
	// RetryBase and RetryMax shape the exponential backoff between attempts.
	RetryBase time.Duration
	RetryMax  time.Duration
	// QueuePoll is how often the queue is polled (latency of a start).
	QueuePoll time.Duration
	// MaxRecoveryAttempts bounds how often a crashed deploy is resumed.
	MaxRecoveryAttempts int
	// MaxArtifactBytes bounds a download; ArtifactIdleTimeout and
	// ArtifactTimeout end one that stalls or takes too long (pkg/artifact).
	MaxArtifactBytes    int64
	ArtifactIdleTimeout time.Duration
	ArtifactTimeout     time.Duration
	// ArtifactFiles checks the real path of a file:// artifact reached
	// through a symbolic link (artifacts.sources); nil allows any.
	ArtifactFiles func(path string) error
	Plugins       *plugin.Registry
	// PassEnv names the server's variables script and external plugin
	// commands get (plugins.pass_env): their values are masked in what
	// steps write, as secrets.
	PassEnv []string
	// Callbacks is the callback policy; CallbackSecret signs callbacks (none:
	// callback deliveries fail visibly); Chat maps chat channels to
	// Slack-compatible incoming-webhook URLs.
	// ITSM opens, follows and closes change tickets (nil: none); ChangePoll
	// is how often a pending change is asked about (0: 30 s), and the first
	// wait before a failed close is tried again; ChangeGiveUp is how long an
	// ITSM may fail to answer before a waiting deploy ends ERROR, and how
	// long a close is tried (0: 24 h).
	ITSM         itsm.Provider
	ChangePoll   time.Duration
	ChangeGiveUp time.Duration
	// SchedulerPoll is how often DBOS reconciles schedules (0: 30 s).
	SchedulerPoll time.Duration
	// Admitter runs the submission checks: again in the config step, for
	// each schedule tick, and for the freezes of rollout waves. Required.
	Admitter       *admit.Admitter
	Callbacks      urlpolicy.Callbacks
	CallbackSecret []byte
	Chat           map[string]string
	// Retention bounds the history kept (retention.*).
	Retention Retention
	// Heartbeat is how often this worker records that it is alive
	// (workers.heartbeat, 0: 5 s); DeadAfter how long a silent worker is
	// alive for the others (workers.dead_after, 0: 30 s).
	Heartbeat time.Duration
	DeadAfter time.Duration
	// ForgetAfter is how long the leader keeps a worker taken over in the
	// workers list (workers.forget_after, 0: DefaultForgetAfter).
	ForgetAfter time.Duration
	// Seat says where this worker runs, when it holds the lock that makes
	// it the only process there with its executor id (store.WorkerStart;
	// "": no such lock, so a restart on PostgreSQL waits for dead_after
	// when the previous process did not stop cleanly).
	Seat string
	// Settings digests this worker's policy-relevant configuration
	// (store.WorkerConfig), recorded in its manent_workers row: a worker
	// starting beside live workers configured otherwise warns, and
	// Workers says which differ.
	Settings store.WorkerConfig
	// OnFenced is called once when this worker learns the others declared
	// it dead, or finds itself cut off (ErrCutOff): it runs no more steps
	// and must stop (the node exits).
	OnFenced func(error)
	// Lease (PostgreSQL; nil: none) is told after each heartbeat that
	// lands how long this worker may go on without another, and the grace
	// its steps' processes get when it does not: plugin.Procs.Lease, whose
	// lifeline stops them then (workers.go, cutOff).
	Lease func(within, grace time.Duration)
	// Artifacts downloads artifacts and Health runs health checks: pkg/egress
	// clients with the policies of artifacts.sources and health.allow (nil
	// refuses every request).
	Artifacts *http.Client
	Health    *http.Client
	Logger    *slog.Logger
}

// Engine runs deploys.
type Engine struct {
	cfg         Config
	stopSweeper context.CancelFunc
	st          *store.Store
	dbos        dbos.Context
	reader      dbos.Context // DBOS reads for GET handlers: the read-only pool on SQLite (New)
	queue       dbos.Queue
	fetcher     *artifact.Fetcher
	outbox      *notify.Outbox
	log         *slog.Logger
	live        *liveness
	// retentionFrom is where this worker's last batch of
	// retention.workflows stopped looking (past deploys whose deliveries
	// still run); a hint, lost with the process: the next batch then
	// starts from the oldest again.
	retentionFrom atomic.Pointer[store.RetentionMark]
	// takenOverDead and takenOverLeft count the workers this engine took
	// over as leader (lead): dead, and left (TakeOvers).
	takenOverDead, takenOverLeft atomic.Int64
}

// New prepares the engine on st's database: DBOS context, queue and
// workflow registration. Call Launch to start working.
func New(ctx context.Context, st *store.Store, cfg Config) (*Engine, error) {
	if cfg.Slots <= 0 {
		cfg.Slots = defaultSlots
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = time.Minute
	}
	if cfg.QueuePoll <= 0 {
		cfg.QueuePoll = defaultQueuePoll
	}
	if cfg.MaxRecoveryAttempts <= 0 {
		cfg.MaxRecoveryAttempts = defaultRecovery
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.DeadAfter <= 0 {
		cfg.DeadAfter = DefaultDeadAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ExecutorID == "" {
		cfg.ExecutorID = "local"
	}
	if cfg.Plugins == nil {
		return nil, errors.New("engine: no plugin registry")
	}
	if cfg.Admitter == nil {
		return nil, errors.New("engine: no admitter")
	}
	dcfg := dbos.Config{
		AppName:                  appName,
		ExecutorID:               cfg.ExecutorID,
		ApplicationVersion:       WorkflowVersion,
		Logger:                   cfg.Logger.With("component", "dbos"),
		SchedulerPollingInterval: cfg.SchedulerPoll,
		// A schedule's ticks missed while no worker ran are made up once
		// (the latest deploys): one tick workflow, not one a missed tick
		// (DBOS patch 13).
		AutomaticBackfillMaxTicks: 1,
	}
	if st.Postgres() {
		dcfg.SystemDBPool = st.Pool()
	} else {
		dcfg.SQLiteSystemDB = st.DB()
	}
	dctx, err := dbos.NewContext(context.WithoutCancel(ctx), dcfg)
	if err != nil {
		return nil, fmt.Errorf("start DBOS: %w", err)
	}
	// DBOS reads its own tables through the write pool, where on SQLite
	// they wait behind queued writers. Reads that GET handlers make
	// (callback deliveries of a running deploy) go through a second DBOS
	// context on the read-only pool, never launched: it runs nothing and
	// migrates nothing. On PostgreSQL reads never wait for the write lock.
	reader := dctx
	if !st.Postgres() {
		reader, err = dbos.NewContext(context.WithoutCancel(ctx), dbos.Config{
			AppName: appName, ExecutorID: cfg.ExecutorID + "-reader", ApplicationVersion: WorkflowVersion,
			Logger: cfg.Logger.With("component", "dbos-reader"), SQLiteSystemDB: st.ReadDB(), SkipMigrations: true,
		})
		if err != nil {
			return nil, fmt.Errorf("start DBOS reader: %w", err)
		}
	}
	e := &Engine{
		cfg:    cfg,
		st:     st,
		dbos:   dctx,
		reader: reader,
		fetcher: &artifact.Fetcher{HTTP: cfg.Artifacts, MaxBytes: cfg.MaxArtifactBytes,
			IdleTimeout: cfg.ArtifactIdleTimeout, Timeout: cfg.ArtifactTimeout, Files: cfg.ArtifactFiles},
		log:  cfg.Logger,
		live: newLiveness(),
	}
	e.queue, err = dbos.RegisterQueue(dctx, QueueName,
		dbos.WithPartitionConcurrency(1),
		dbos.WithWorkerConcurrency(cfg.Slots),
		dbos.WithQueueBasePollingInterval(cfg.QueuePoll))
	if err != nil {
		return nil, fmt.Errorf("register queue: %w", err)
	}
	webhooks := make([]string, 0, len(cfg.Chat))
	for _, u := range cfg.Chat {
		webhooks = append(webhooks, u)
	}
	e.outbox, err = notify.NewOutbox(dctx, notify.OutboxConfig{
		Callbacks: notify.NewSender(cfg.Callbacks, cfg.CallbackSecret, 0),
		Chat:      &notify.Chat{Channels: cfg.Chat, Sender: notify.NewChatSender(webhooks, 0)},
		Logger:    cfg.Logger.With("component", "notify"),
	})
	if err != nil {
		return nil, fmt.Errorf("callback outbox: %w", err)
	}
	// Gates wait (for a time, dependencies, approvals) outside the deploy
	// queue; they hold no deploy slot and no concurrency limit applies.
	if _, err := dbos.RegisterQueue(dctx, GateQueue, dbos.WithQueueBasePollingInterval(cfg.QueuePoll)); err != nil {
		return nil, fmt.Errorf("register queue: %w", err)
	}
	dbos.RegisterWorkflow(dctx, e.tickWorkflow, dbos.WithWorkflowName(TickWorkflow))
	// A gate waits (days, for an approval) and is resumed by every restart
	// of its worker: restarts are not crashes of the gate, and DBOS must
	// never dead-letter it for them (0: no limit).
	dbos.RegisterWorkflow(dctx, e.gateWorkflow, dbos.WithWorkflowName(GateWorkflow),
		dbos.WithMaxRecoveryAttempts(0))
	// A deploy gives itself up after MaxRecoveryAttempts interruptions of
	// one step (run.giveUp) and concludes while it still holds its
	// environment. DBOS counts every resumption, also of a deploy that only
	// waits (an observation time, a wave's approval) across restarts: its
	// limit is a far backstop, which the sweeper handles.
	dbos.RegisterWorkflow(dctx, e.deployWorkflow,
		dbos.WithWorkflowName(DeployWorkflow),
		dbos.WithMaxRecoveryAttempts(dbosRecoveryBackstop))
	dbos.RegisterWorkflow(dctx, e.announceWorkflow, dbos.WithWorkflowName(AnnounceWorkflow),
		dbos.WithMaxRecoveryAttempts(dbosRecoveryBackstop))
	dbos.RegisterWorkflow(dctx, e.changeCloseWorkflow, dbos.WithWorkflowName(ChangeCloseWorkflow),
		dbos.WithMaxRecoveryAttempts(dbosRecoveryBackstop))
	e.registerRetention(dctx)
	return e, nil
}

// Launch starts the queue runner and recovers this executor's interrupted
// deploys, then re-enqueues any accepted deploy DBOS never saw.
func (e *Engine) Launch(ctx context.Context) error {
	// Registered (alive) before DBOS recovers this executor's deploys: a
	// takeover of this worker in progress finishes first (RegisterWorker
	// waits while another worker's claim on it is live, store.TakeOver).
	if err := e.StartWorker(ctx); err != nil {
		return err
	}
	// Before DBOS's scheduler starts: it installs the mended schedules.
	if err := e.repairSchedules(ctx); err != nil {
		return err
	}
	if err := dbos.Launch(e.dbos); err != nil {
		return fmt.Errorf("launch DBOS: %w", err)
	}
	if err := e.Reconcile(ctx); err != nil {
		return err
	}
	// After Reconcile (which enqueues a gate DBOS never saw) and once DBOS
	// recovers this executor's gates: each waiting gate recounts under
	// this worker's configuration now, not at its next poll.
	e.wakeGates(ctx)
	if err := e.scheduleRetention(); err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.stopSweeper = cancel
	go e.runSweeper(sctx)
	return nil
}

// Shutdown stops taking work; running steps get timeout to finish and no
// new step starts; then DBOS stops (what still runs is interrupted) and the
// worker is marked leaving, so another worker takes its deploys over at
// once (SPEC §11.3).
func (e *Engine) Shutdown(timeout time.Duration) {
	if e.stopSweeper != nil {
		e.stopSweeper()
	}
	launched := e.live.stop != nil
	if launched {
		e.drain(timeout)
	}
	dbos.Shutdown(e.dbos, timeout)
	e.stopWorker()
}

// Store returns the engine's store.
func (e *Engine) Store() *store.Store { return e.st }

// Submit makes a checked deploy durable: its row and its workflow are
// written in one transaction, so a 202 never loses a deploy.
// The state and id of the accepted deploy are known before the
// transaction commits; also, when given, runs in the same transaction (the
// server records the Idempotency-Key's answer there), so the deploy and
// whatever also records are durable together or not at all.
func (e *Engine) Submit(ctx context.Context, in plan.Input, decision *manent.Decision, also ...func(tx *sql.Tx, rec *store.Record) error) (*store.Record, error) {
	// Refused while the database's disk is full (a 503 with Retry-After),
	// as /readyz says: accepted, the deploy would fail at its first step
	// that needs the disk.
	if err := e.st.CheckRoom(); err != nil {
		return nil, err
	}
	if in.ID == "" {
		in.ID = manent.NewDeploymentID()
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode input: %w", err)
	}
	rec := &store.Record{
		Deployment: manent.Deployment{
			ID: in.ID, Application: in.Application, Environment: in.Environment, Version: in.Version,
			State: in.Waits.FirstState(), Reason: in.Waits.FirstReason(), Requester: in.Requester, CreatedAt: time.Now().UTC(), Decision: decision,
			RollbackOf: in.RollbackOf,
		},
		Input: raw,
	}
	// A rollback redeploys an old descriptor: its commit time is the old
	// change's, no lead-time sample of this deploy (SPEC §11.5).
	if in.Descriptor != nil && in.RollbackOf == "" {
		if at, ok := in.Descriptor.Source.CommitTime(); ok {
			at = at.UTC()
			rec.CommittedAt = &at
		}
	}
	err = e.st.Tx(ctx, func(tx *sql.Tx) error {
		// The deploys it comes after, and its version's successes
		// (promotion), are locked until the commit: retention.deploys
		// waits, then sees this deploy and keeps them. One it removed
		// since admission checked it is said here, not at the gate as
		// DEPENDENCY_FAILED "does not exist" months later.
		// A deploy that needs none (most: a new version, no after) asks
		// nothing more.
		var missing []string
		if len(in.Waits.After) > 0 || len(in.Successes) > 0 {
			var lerr error
			if missing, lerr = e.st.LockReferencesTx(ctx, tx, append(slices.Clip(in.Waits.After), in.Successes...), in.Application, in.Version); lerr != nil {
				return lerr
			}
		}
		for _, id := range missing {
			if slices.Contains(in.Waits.After, id) {
				return manent.Errorf(manent.EConflict, "after: deploy %s no longer exists (retention.deploys removed it while this deploy was submitted): submit again without it", id)
			}
			return manent.Errorf(manent.EConflict, "deploy %s, a success of version %s the governance policy judged promotion on, no longer exists (retention.deploys removed it while this deploy was submitted): submit again, to be judged on what is kept",
				id, in.Version)
		}
		if err := e.st.InsertDeployment(ctx, tx, rec); err != nil {
			return err
		}
		rows := PlanRowsWaves(in.Plan, in.Waves)
		if in.Waits.Change {
			rows = append(append([]string{StepChangeOpen}, rows...), StepChangeClose)
		}
		if err := e.st.PlanSteps(ctx, tx, in.ID, rows); err != nil {
			return err
		}
		enqueue := e.enqueue
		if !in.Waits.Empty() {
			enqueue = e.enqueueGate
		}
		if err := enqueue(in, tx); err != nil {
			return err
		}
		// Last: a row lock also takes (the audit chain's head on
		// PostgreSQL) is held only until the commit.
		for _, fn := range also {
			if err := fn(tx, rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("submit %s: %w", in.ID, err)
	}
	// The enqueue committed with the deploy: let this process's queue
	// worker poll now instead of at the end of its sleep, so an idle
	// deploy starts at once. Other workers keep polling.
	if in.Waits.Empty() {
		dbos.WakeQueue(e.dbos, QueueName)
	} else {
		dbos.WakeQueue(e.dbos, GateQueue)
	}
	return rec, nil
}

func (e *Engine) enqueue(in plan.Input, tx *sql.Tx) error {
	opts := []dbos.EnqueueOption{
		dbos.WithEnqueueWorkflowID(in.ID),
		dbos.WithEnqueueQueuePartitionKey(plan.PartitionKey(in.Application, in.Environment)),
		dbos.WithEnqueueApplicationVersion(WorkflowVersion),
		dbos.WithEnqueueAttributes(map[string]any{
			"application": in.Application, "environment": in.Environment, "version": in.Version,
		}),
	}
	if tx != nil {
		opts = append(opts, dbos.WithEnqueueTransaction(tx))
	}
	_, err := dbos.Enqueue[Result](e.dbos, QueueName, DeployWorkflow, in, opts...)
	return err
}

// Reconcile brings the app tables and DBOS into agreement after a start:
// an accepted deploy without a workflow is enqueued; a deploy whose
// workflow DBOS gave up recovering is marked MAX_RECOVERY_ATTEMPTS_EXCEEDED.
func (e *Engine) Reconcile(ctx context.Context) error {
	recs, err := e.st.Unfinished(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	for _, r := range recs {
		_, err := e.workflowStatus(r.ID)
		switch {
		case errors.Is(err, dbos.ErrNonExistentWorkflow) || (err != nil && strings.Contains(err.Error(), "not found")):
			var in plan.Input
			if json.Unmarshal(r.Input, &in) != nil {
				continue
			}
			if !in.Waits.Empty() && r.State != manent.StateEnqueued {
				if _, gerr := e.workflowStatus(gateID(r.ID)); gerr == nil {
					continue // waiting in its gate
				}
				if err := e.enqueueGate(in, nil); err != nil && !errors.Is(err, dbos.ErrWorkflowIDInUse) {
					return fmt.Errorf("re-enqueue the gate of %s: %w", r.ID, err)
				}
				continue
			}
			if r.State != manent.StateEnqueued && r.State != manent.StatePending {
				continue
			}
			e.log.Warn("re-enqueueing an accepted deploy DBOS never saw", "deploy", r.ID)
			if err := e.enqueue(in, nil); err != nil && !errors.Is(err, dbos.ErrWorkflowIDInUse) {
				return fmt.Errorf("re-enqueue %s: %w", r.ID, err)
			}
		case err != nil:
			return fmt.Errorf("reconcile %s: %w", r.ID, err)
		}
	}
	return e.sweep(ctx)
}

func (e *Engine) workflowStatus(id string) (dbos.WorkflowStatusType, error) {
	h, err := dbos.RetrieveWorkflow[Result](e.dbos, id)
	if err != nil {
		return "", err
	}
	s, err := h.GetStatus()
	if err != nil {
		return "", err
	}
	return s.Status, nil
}

// Refresh returns a deploy as users see it, with its rollout, approvals
// and deliveries. It only reads: the deploy's state is the store's.
func (e *Engine) Refresh(ctx context.Context, id string) (*store.Record, error) {
	r, err := e.st.Deployment(ctx, id)
	if err != nil {
		return nil, err
	}
	if waves, err := e.st.Rollout(ctx, id); err == nil {
		var decided map[string][]manent.Approval
		if len(waves) > 0 { // a wave is decided on only once it waited
			if decided, err = e.st.AllWaveApprovals(ctx, id); err != nil {
				return nil, err
			}
		}
		r.Rollout = RolloutStatus(r.Input, waves, decided)
	}
	if saved, kept, err := e.st.SavedDeliveries(ctx, id); err == nil && kept {
		if len(saved) > 2 { // not "[]"
			r.Deliveries = saved
		}
	} else if ds, err := notify.Deliveries(e.reader, id); err == nil && len(ds) > 0 {
		r.Deliveries, _ = json.Marshal(ds)
	}
	var in plan.Input
	if json.Unmarshal(r.Input, &in) == nil && in.Waits.Approvals != nil {
		r.PlanDigest = plan.Digest(in)
		if r.Approvals, err = e.st.Approvals(ctx, id); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Cancel cancels a deploy (SPEC §5): a queued one at once, a running one at
// the start of its next step (the running step completes).
func (e *Engine) Cancel(ctx context.Context, id string) (*store.Record, error) {
	return e.CancelBy(ctx, id, "")
}

// CancelBy is Cancel asked by who (an identity, "": not said): the
// deploy's error says who cancelled it, `cancelled by token:ci`, as a
// rejection's says who rejected it.
func (e *Engine) CancelBy(ctx context.Context, id, who string) (*store.Record, error) {
	why := "cancelled"
	if who != "" {
		why += " by " + who
	}
	rec, _, err := e.cancel(ctx, id, store.CancelRequest{Reason: why})
	return rec, err
}

// cancel is Cancel with req's reason, states and audit entry
// (store.RequestCancel); it reports whether req set the deploy's cancel
// flag. A deploy waiting in its gate, or still on the queue, ends now; one
// a worker picked up meanwhile, or a running one, ends at its next step.
// Whoever ends it, the deploy's error is the first request's reason. A
// deploy in none of req.States is left alone (nil record).
func (e *Engine) cancel(ctx context.Context, id string, req store.CancelRequest) (*store.Record, bool, error) {
	st, set, err := e.st.RequestCancel(ctx, id, req)
	if err != nil {
		return nil, false, err
	}
	if st.Final() {
		return nil, false, manent.Errorf(manent.EConflict, "deploy %s is already %s", id, st)
	}
	if len(req.States) > 0 && !slices.Contains(req.States, st) {
		return nil, false, nil
	}
	why, err := e.cancelReason(ctx, id)
	if err != nil {
		return nil, set, err
	}
	switch st {
	case manent.StateDelayed, manent.StateWaitingDependency, manent.StateAwaitingApproval:
		// Waiting in its gate: cancelled at once, the gate is told to stop.
		if err := e.conclude(ctx, id, store.Outcome{State: manent.StateCancelled, Error: why}); err != nil {
			return nil, set, err
		}
		if err := dbos.Send(e.dbos, gateID(id), gateMsg{Kind: "cancel"}, gateTopic); err != nil {
			e.log.Warn("tell the gate of a cancelled deploy", "deploy", id, "error", err)
		}
		rec, err := e.st.Deployment(ctx, id)
		return rec, set, err
	}
	if st == manent.StatePending {
		// A running deploy waiting for a wave's approval is woken to stop.
		_ = dbos.Send(e.dbos, id, gateMsg{Kind: "cancel"}, waveApprovalTopic)
	}
	if st != manent.StatePending {
		// Not started: take it off the queue. If a worker picked it up in the
		// meantime, its first step sees the flag and ends CANCELLED. Taken
		// off by a call that stopped before concluding: concluded now.
		ws, err := e.workflowStatus(id)
		if err == nil && (ws == dbos.WorkflowStatusEnqueued || ws == dbos.WorkflowStatusCancelled) {
			if ws == dbos.WorkflowStatusEnqueued {
				if err := dbos.CancelWorkflow(e.dbos, id); err != nil {
					return nil, set, fmt.Errorf("cancel %s: %w", id, err)
				}
			}
			if err := e.conclude(ctx, id, store.Outcome{State: manent.StateCancelled, Error: why}); err != nil {
				return nil, set, err
			}
		}
	}
	rec, err := e.st.Deployment(ctx, id)
	return rec, set, err
}

// cancelReason is the error a deploy flagged for cancel ends with: its
// request's reason, "cancelled" when it has none (or the deploy is gone).
// A failed read is an error, not "cancelled": the reason it would replace
// ("superseded by …") would be lost for good.
func (e *Engine) cancelReason(ctx context.Context, id string) (string, error) {
	if err := injectedFault("cancel reason"); err != nil {
		return "", err
	}
	why, err := e.st.CancelReason(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("read why deploy %s was cancelled: %w", id, err)
	}
	if why == "" {
		why = "cancelled"
	}
	return why, nil
}

// Recover resumes the PENDING deploys of other executors (after their
// worker died for good). Never use it on a live executor: its steps would
// run twice.
func (e *Engine) Recover(executorIDs []string) ([]string, error) {
	rt, err := internals.RuntimeOf(e.dbos)
	if err != nil {
		return nil, err
	}
	hs, err := rt.RecoverPendingWorkflows(executorIDs)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(hs))
	for i, h := range hs {
		ids[i] = h.GetWorkflowID()
	}
	return ids, nil
}

// WorkDir is a deploy's work directory.
func (e *Engine) WorkDir(id string) string {
	return filepath.Join(e.cfg.DataDir, "work", id)
}

func (e *Engine) removeWorkDir(id string) error {
	err := os.RemoveAll(e.WorkDir(id))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
