package server

import (
	"database/sql"
	"errors"
	"net/http"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// createSchedule records a recurring deploy (schedule.cron) that
// admission accepted: governance runs at each tick.
func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request, body []byte, d *descriptor.Descriptor, p manent.Identity, key string) {
	sc := &store.Schedule{ID: engine.NewScheduleID(), Application: d.Application, Environment: d.Environment,
		Cron: d.Schedule.Cron, Descriptor: body, Requester: p.Subject, RequesterGroups: p.Groups, CreatedAt: time.Now().UTC()}
	res := api.SubmitResult{Schedule: sc.ID, State: manent.StateScheduled}
	// The schedule, its Idempotency-Key, its audit entry and its
	// registration with the DBOS scheduler commit together: racing retries
	// with one key create one schedule, a client gone before the answer
	// finds it again with its key, and a key never names a schedule that
	// is not there (a refused registration records none).
	var also []func(*sql.Tx) error
	if key != "" {
		also = append(also, func(tx *sql.Tx) error {
			return s.recordIdempotency(r.Context(), tx, p, key, body, http.StatusCreated, res)
		})
	}
	also = append(also, func(tx *sql.Tx) error {
		return s.st.AppendAuditTx(r.Context(), tx, store.AuditEntry{Identity: p.Subject, Action: "schedule.create",
			Target: sc.ID, RequestID: requestID(r), Outcome: "accepted", Detail: sc.Cron})
	})
	err := s.eng.CreateSchedule(r.Context(), sc, also...)
	if errors.Is(err, store.ErrIdempotencyTaken) && s.replay(w, r, p, key, body) {
		return // a concurrent request with the same key won
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.Header().Set("Location", "/api/v1/schedules/"+sc.ID)
	writeJSON(w, http.StatusCreated, res)
}

func (s *Server) handleSchedules(w http.ResponseWriter, r *http.Request) {
	p, scope, ok := s.authenticateScope(w, r)
	if !ok {
		return
	}
	all, err := s.st.Schedules(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := api.SchedulesResult{Items: []api.Schedule{}}
	now := time.Now()
	for _, sc := range all {
		if !scope.has(sc.Application, sc.Environment) {
			continue
		}
		if s.cfg.Guard.Authorize(p, PermRead, sc.Application, sc.Environment) == nil {
			out.Items = append(out.Items, wireSchedule(sc, now))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleDeleteSchedule(w http.ResponseWriter, r *http.Request) {
	p, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	sc, err := s.st.GetSchedule(r.Context(), r.PathValue("id"))
	notFound := manent.Errorf(manent.ENotFound, "schedule %s not found", manent.ClipText(r.PathValue("id"), maxEchoed))
	if errors.Is(err, store.ErrNotFound) || (err == nil && sc.DeletedAt != nil) {
		writeError(w, r, s.log, notFound)
		return
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if err := s.cfg.Guard.Authorize(p, PermSchedule, sc.Application, sc.Environment); err != nil {
		// A caller who may not read its application/environment learns
		// neither that the schedule exists nor where it deploys.
		if s.cfg.Guard.Authorize(p, PermRead, sc.Application, sc.Environment) != nil {
			err = notFound
		}
		writeError(w, r, s.log, err)
		return
	}
	// The deletion, its audit entry and the schedule's removal from the
	// DBOS scheduler commit together.
	err = s.eng.DeleteSchedule(r.Context(), sc.ID, func(tx *sql.Tx) error {
		return s.st.AppendAuditTx(r.Context(), tx, store.AuditEntry{Identity: p.Subject, Action: "schedule.delete",
			Target: sc.ID, RequestID: requestID(r), Outcome: "accepted"})
	})
	if errors.Is(err, store.ErrNotFound) {
		err = notFound // deleted by a concurrent request
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
