package server

import (
	"encoding/json"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/cronspec"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/pkg/version"
)

// The REST wire format is pkg/api's types (with the domain types of
// pkg/manent and pkg/clusterstate they hold). Store rows never go to the
// wire as they are: they are converted here, in one place.

// wireSchedule converts a schedule, with its next tick after now (computed
// by pkg/cronspec, as the engine schedules it).
func wireSchedule(sc store.Schedule, now time.Time) api.Schedule {
	out := api.Schedule{ID: sc.ID, Application: sc.Application, Environment: sc.Environment, Cron: sc.Cron,
		State: sc.State, Requester: sc.Requester, CreatedAt: sc.CreatedAt, DeletedAt: sc.DeletedAt, LastTick: sc.LastTick,
		LastDeploy: sc.LastDeploy, LastError: sc.LastError}
	if spec, err := cronspec.Parse(sc.Cron); err == nil && sc.DeletedAt == nil {
		since := sc.CreatedAt
		if sc.LastTick != nil {
			since = *sc.LastTick
		}
		if next := spec.NextSince(since, now); !next.IsZero() {
			next = next.UTC()
			out.NextTick = &next
		}
	}
	return out
}

func wireAuditEntry(e store.AuditEntry) api.AuditEntry {
	return api.AuditEntry{Seq: e.Seq, Time: e.Time, Identity: e.Identity, Action: e.Action, Target: e.Target,
		RequestID: e.RequestID, Outcome: e.Outcome, Detail: e.Detail, ClientAddr: e.ClientAddr, UserAgent: e.UserAgent,
		PrevHash: e.PrevHash, Hash: e.Hash}
}

func wireEvent(e store.Event) api.Event {
	return api.Event{DeploymentID: e.DeploymentID, Seq: e.Seq, Type: e.Type, Time: e.Time, Data: e.Data}
}

// wireWorker converts a worker with its running count.
func wireWorker(w engine.WorkerInfo) api.Worker {
	return api.Worker{
		ID: w.ID, State: w.State, LastSeen: w.LastSeen, Running: w.Running, Waiting: w.Waiting,
		StartedAt: w.StartedAt, Version: w.Version, TakenOver: w.TakenOverAt, TakenOverBy: w.TakenOverBy,
		Config: w.ConfigNote,
	}
}

// rollbackFrom is the deploy a rollback deployed again, read from its
// stored input ("" for another deploy, or a rollback that did not record it).
func rollbackFrom(rec store.Record) string {
	if rec.RollbackOf == "" {
		return ""
	}
	var in struct {
		RollbackFrom string `json:"rollback_from"`
	}
	if json.Unmarshal(rec.Input, &in) != nil {
		return ""
	}
	return in.RollbackFrom
}

// wireHistory converts one page of an environment's deploys, marking the
// current release.
func wireHistory(app, env string, cur *manent.Release, recs []store.Record, next string) api.HistoryResult {
	out := api.HistoryResult{Application: app, Environment: env, Current: cur, Items: []api.HistoryEntry{}, NextCursor: next}
	for _, rec := range recs {
		out.Items = append(out.Items, api.HistoryEntry{
			ID: rec.ID, Version: rec.Version, State: rec.State, Requester: rec.Requester, CreatedAt: rec.CreatedAt,
			FinishedAt: rec.FinishedAt, Error: rec.Error, Rollback: rec.Rollback, RollbackOf: rec.RollbackOf,
			RollbackFrom: rollbackFrom(rec), Current: cur != nil && cur.DeploymentID == rec.ID,
		})
	}
	return out
}

// wireCurrent converts the current release with the effective deploy it
// was admitted with.
func wireCurrent(app, env string, cur *manent.Release, in plan.Input) api.CurrentResult {
	eff := map[string]any{}
	_ = json.Unmarshal(in.Effective, &eff)
	return api.CurrentResult{Application: app, Environment: env, Release: cur, Effective: eff}
}

func wireEffective(d manent.Deployment, effective json.RawMessage) api.EffectiveResult {
	eff := map[string]any{}
	_ = json.Unmarshal(effective, &eff)
	return api.EffectiveResult{ID: d.ID, Application: d.Application, Environment: d.Environment, Version: d.Version, Effective: eff}
}

func wireVersion(v version.Info) api.VersionInfo {
	return api.VersionInfo{Version: v.Version, Commit: v.Commit, Date: v.Date, Go: v.Go}
}
