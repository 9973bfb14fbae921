package server

import (
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/store"
)

// The REST wire format is pkg/api's types (with the domain types of
// pkg/manent and pkg/clusterstate they hold). Store rows never go to the
// wire as they are: they are converted here, in one place.

func wireSchedule(sc store.Schedule) api.Schedule {
	return api.Schedule{ID: sc.ID, Application: sc.Application, Environment: sc.Environment, Cron: sc.Cron,
		State: sc.State, Requester: sc.Requester, CreatedAt: sc.CreatedAt, DeletedAt: sc.DeletedAt, LastTick: sc.LastTick,
		LastDeploy: sc.LastDeploy, LastError: sc.LastError}
}

func wireAuditEntry(e store.AuditEntry) api.AuditEntry {
	return api.AuditEntry{Seq: e.Seq, Time: e.Time, Identity: e.Identity, Action: e.Action, Target: e.Target,
		RequestID: e.RequestID, Outcome: e.Outcome, Detail: e.Detail, PrevHash: e.PrevHash, Hash: e.Hash}
}

func wireEvent(e store.Event) api.Event {
	return api.Event{DeploymentID: e.DeploymentID, Seq: e.Seq, Type: e.Type, Time: e.Time, Data: e.Data}
}

// wireWorker converts a worker with its running count.
func wireWorker(w engine.WorkerInfo) api.Worker {
	return api.Worker{
		ID: w.ID, State: w.State, LastSeen: w.LastSeen, Running: w.Running,
		StartedAt: w.StartedAt, Version: w.Version, TakenOver: w.TakenOverAt, TakenOverBy: w.TakenOverBy,
	}
}
