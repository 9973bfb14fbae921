package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/manent-io/manent/pkg/notify"
	"github.com/manent-io/manent/pkg/store"
)

// RetentionWorkflow is the scheduled workflow that keeps DBOS's tables to
// the working set (retention.workflows) and, when asked, bounds manent's
// own history (retention.logs, retention.deploys).
const RetentionWorkflow = "manent.retention"

// Retention says how long history is kept; zero keeps it for ever.
type Retention struct {
	// Workflows: the DBOS rows (status, step outputs, deliveries) of a
	// final deploy older than this are deleted with DBOS's DeleteWorkflows;
	// manent's tables keep its status, steps, logs and deliveries.
	Workflows time.Duration
	// Logs: the log lines of final deploys older than this are removed.
	Logs time.Duration
	// Deploys: final deploys older than this are removed from manent's
	// tables (never an environment's current release or last failure; the
	// audit log is kept). Must be at least Workflows.
	Deploys time.Duration
	// Every is how often retention runs (0: 10 minutes).
	Every time.Duration
}

// retentionBatch and retentionBatches bound one run: a run removes at most
// retentionBatch × retentionBatches deploys' workflows, in steps of one
// batch, so it never holds the database long; the next run goes on.
//
// retentionScan bounds how many deploys one batch of retention.workflows
// looks at: those whose DBOS workflows still run (a callback delivery
// still retrying) are looked past, and the next batch goes on after them.
var (
	retentionBatch   = 100
	retentionBatches = 20
	retentionScan    = 1000
)

// RetentionReport is what one retention run removed.
type RetentionReport struct {
	Workflows  int `json:"workflows"`
	Deploys    int `json:"deploys"`
	LogsOf     int `json:"logs_of"`
	Background int `json:"background"`
	// LookedPast is how many deploys whose deliveries still run a batch
	// looked past when it stopped at retentionScan with more to look at:
	// the run goes on with another batch rather than end there.
	LookedPast int `json:"looked_past,omitempty"`
}

func (e *Engine) registerRetention(dctx dbos.Context) {
	dbos.RegisterWorkflow(dctx, e.retentionWorkflow, dbos.WithWorkflowName(RetentionWorkflow))
}

// scheduleRetention (re)applies the retention schedule; every worker does,
// DBOS runs each tick once.
func (e *Engine) scheduleRetention() error {
	r := e.cfg.Retention
	if r.Workflows <= 0 && r.Logs <= 0 && r.Deploys <= 0 {
		if err := dbos.DeleteSchedule(e.dbos, RetentionWorkflow); err != nil && !errors.Is(err, dbos.ErrScheduleNotFound) {
			return fmt.Errorf("delete the retention schedule: %w", err)
		}
		return nil
	}
	every := r.Every
	if every <= 0 {
		every = 10 * time.Minute
	}
	return dbos.ApplySchedules(e.dbos, []dbos.ScheduleSpec{{
		ScheduleName: RetentionWorkflow, Schedule: "@every " + every.String(), WorkflowName: RetentionWorkflow,
	}})
}

func (e *Engine) retentionWorkflow(ctx dbos.Context, in dbos.ScheduledWorkflowInput) (RetentionReport, error) {
	var rep RetentionReport
	now := in.ScheduledTime
	for i := 0; i < retentionBatches; i++ {
		n, err := dbos.RunAsStep(ctx, func(c context.Context) (RetentionReport, error) {
			return e.retain(c, now)
		}, dbos.WithStepName(fmt.Sprintf("batch-%d", i)), dbos.WithStepMaxRetries(3))
		if err != nil {
			return rep, err
		}
		rep.Workflows += n.Workflows
		rep.Deploys += n.Deploys
		rep.LogsOf += n.LogsOf
		rep.Background += n.Background
		rep.LookedPast += n.LookedPast
		if n == (RetentionReport{}) {
			break
		}
	}
	if rep != (RetentionReport{}) {
		e.log.Info("retention", "workflows_of", rep.Workflows, "logs_of", rep.LogsOf, "deploys", rep.Deploys, "background_workflows", rep.Background,
			"looked_past_running_deliveries", rep.LookedPast)
	}
	return rep, nil
}

// Retain runs one batch of retention as of now; the scheduled workflow
// calls it until a batch finds nothing to do. Each deploy's removal is
// idempotent, so a batch interrupted by a crash is simply run again.
func (e *Engine) Retain(ctx context.Context, now time.Time) (RetentionReport, error) {
	return e.retain(ctx, now)
}

func (e *Engine) retain(ctx context.Context, now time.Time) (RetentionReport, error) {
	var rep RetentionReport
	r := e.cfg.Retention
	if r.Workflows > 0 {
		// The deploys left (a delivery still retrying: a later run takes
		// them) stay first in the list; a batch looks past up to
		// retentionScan of them, on from where the last batch of this
		// worker stopped (retentionFrom), and back from the first once it
		// reaches the end: any number of them never stalls retention.
		from := e.retentionFrom.Load()
		if from == nil {
			from = &store.RetentionMark{}
		}
		wrapped := false
		looked := 0
		for rep.Workflows < retentionBatch && looked < retentionScan {
			fs, err := e.st.WorkflowsToDelete(ctx, now.Add(-r.Workflows), min(retentionBatch, retentionScan-looked), *from)
			if err != nil {
				return rep, err
			}
			if len(fs) == 0 {
				if wrapped || *from == (store.RetentionMark{}) {
					from = &store.RetentionMark{}
					break
				}
				from, wrapped = &store.RetentionMark{}, true
				continue
			}
			busy, err := e.busyDeploys(fs)
			if err != nil {
				return rep, err
			}
			for _, f := range fs {
				looked++
				if busy[f.ID] {
					from = &f
					continue
				}
				if err := e.deleteWorkflows(ctx, f.ID, now); err != nil {
					return rep, err
				}
				rep.Workflows++
			}
		}
		e.retentionFrom.Store(from)
		if looked >= retentionScan && rep.Workflows < retentionBatch {
			rep.LookedPast = looked - rep.Workflows
		}
		// Ticks and retention runs are not a deploy's: they go by age.
		wfs, err := dbos.ListWorkflows(e.dbos,
			dbos.WithFilterName(TickWorkflow, RetentionWorkflow),
			dbos.WithFilterStatus(dbos.WorkflowStatusSuccess, dbos.WorkflowStatusError),
			dbos.WithFilterCompletedBefore(now.Add(-r.Workflows)),
			dbos.WithFilterLimit(retentionBatch),
			dbos.WithFilterLoadInput(false), dbos.WithFilterLoadOutput(false))
		if err != nil {
			return rep, fmt.Errorf("list old background workflows: %w", err)
		}
		if len(wfs) > 0 {
			ids := make([]string, len(wfs))
			for i, wf := range wfs {
				ids[i] = wf.ID
			}
			if err := dbos.DeleteWorkflows(e.dbos, ids); err != nil {
				return rep, fmt.Errorf("delete old background workflows: %w", err)
			}
			rep.Background = len(ids)
		}
	}
	if r.Logs > 0 {
		n, err := e.st.PruneLogs(ctx, now.Add(-r.Logs), retentionBatch)
		if err != nil {
			return rep, err
		}
		rep.LogsOf = n
	}
	if r.Deploys > 0 {
		n, err := e.st.PruneDeploys(ctx, now.Add(-r.Deploys), retentionBatch)
		if err != nil {
			return rep, err
		}
		rep.Deploys = n
	}
	return rep, nil
}

// deleteWorkflows keeps a final deploy's deliveries in manent's tables,
// then deletes every DBOS workflow of the deploy: its own, its gate, its
// announcement and its deliveries (all named "<id>" or "<id>.…"). A crash
// at any point leaves it to be done again: the kept deliveries are kept
// once, and deleting deleted workflows is a no-op.
func (e *Engine) deleteWorkflows(ctx context.Context, id string, now time.Time) error {
	if _, kept, err := e.st.SavedDeliveries(ctx, id); err != nil {
		return err
	} else if !kept {
		ds, err := notify.Deliveries(e.dbos, id)
		if err != nil {
			return err
		}
		if ds == nil {
			ds = []notify.DeliveryStatus{}
		}
		saved, err := json.Marshal(ds)
		if err != nil {
			return err
		}
		if err := e.st.KeepDeliveries(ctx, id, saved); err != nil {
			return err
		}
	}
	ids, err := e.DeployWorkflows(id)
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		if err := dbos.DeleteWorkflows(e.dbos, ids); err != nil {
			return fmt.Errorf("delete the workflows of %s: %w", id, err)
		}
	}
	return e.st.WorkflowsDeleted(ctx, id, now)
}

// busyDeploys returns which of these final deploys still have a DBOS
// workflow that runs or waits: a callback delivery still retrying
// (retention.workflows set shorter than its retries). Their rows are kept
// until it ends, so the delivery is neither deleted under its feet nor
// lost from status. One query for them all: an ID-prefix filter per
// deploy (its own workflow "<id>" and its "<id>.…"), each a range of
// workflow_status's primary key (patches 2 and 14 of
// third_party/dbos-transact-golang), so a batch costs a query per page of
// deploys however many deliveries run.
func (e *Engine) busyDeploys(fs []store.RetentionMark) (map[string]bool, error) {
	if len(fs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(fs))
	want := make(map[string]bool, len(fs))
	for i, f := range fs {
		ids[i] = f.ID
		want[f.ID] = true
	}
	wfs, err := dbos.ListWorkflows(e.dbos, dbos.WithFilterWorkflowIDPrefix(ids...),
		dbos.WithFilterStatus(dbos.WorkflowStatusPending, dbos.WorkflowStatusEnqueued),
		dbos.WithFilterLoadInput(false), dbos.WithFilterLoadOutput(false))
	if err != nil {
		return nil, fmt.Errorf("list the running workflows of %d deploys: %w", len(ids), err)
	}
	busy := make(map[string]bool)
	for _, wf := range wfs {
		// "<id>" or "<id>.…": a prefix also matches a longer id that starts
		// with another (not manent's fixed-width ids, but exact anyway).
		id, _, _ := strings.Cut(wf.ID, ".")
		if want[id] {
			busy[id] = true
		}
	}
	return busy, nil
}

// DeployWorkflows lists the DBOS workflows a deploy still has in DBOS's
// tables: its own, its gate, its announcement and its deliveries.
func (e *Engine) DeployWorkflows(id string) ([]string, error) {
	var ids []string
	if _, err := e.workflowStatus(id); err == nil {
		ids = append(ids, id)
	}
	wfs, err := dbos.ListWorkflows(e.dbos, dbos.WithFilterWorkflowIDPrefix(id+"."),
		dbos.WithFilterLoadInput(false), dbos.WithFilterLoadOutput(false))
	if err != nil {
		return nil, fmt.Errorf("list the workflows of %s: %w", id, err)
	}
	for _, wf := range wfs {
		ids = append(ids, wf.ID)
	}
	return ids, nil
}
