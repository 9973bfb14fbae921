package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// SchedulesResult lists the recurring deploys.
type SchedulesResult struct {
	Items []store.Schedule `json:"items"`
}

// createSchedule makes a recurring deploy (schedule.cron): checks 1 to 4
// and the plan now, governance at each tick.
func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request, body []byte, d *descriptor.Descriptor, p manent.Identity) {
	if err := s.cfg.Guard.Authorize(p, PermSchedule, d.Application, d.Environment); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	sc := &store.Schedule{ID: engine.NewScheduleID(), Application: d.Application, Environment: d.Environment,
		Cron: d.Schedule.Cron, Descriptor: body, Requester: p.Subject, RequesterGroups: p.Groups, CreatedAt: time.Now().UTC()}
	if err := s.eng.CreateSchedule(r.Context(), sc); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	s.audit(r.Context(), r, p, "schedule.create", sc.ID, "accepted", sc.Cron)
	w.Header().Set("Location", "/api/v1/schedules/"+sc.ID)
	writeJSON(w, http.StatusCreated, api.SubmitResult{Schedule: sc.ID, State: manent.StateScheduled})
}

// Tick submits the deploy of one schedule tick through the same checks as
// any submission, as the schedule's creator (engine.TickFunc).
func (s *Server) Tick(ctx context.Context, sc *store.Schedule, at time.Time, id string) error {
	d, err := descriptor.Parse(sc.Descriptor)
	if err != nil {
		return err
	}
	d.Schedule = nil
	p := manent.Identity{Subject: sc.Requester, Groups: sc.RequesterGroups}
	if err := s.cfg.Guard.Authorize(p, PermSubmit, d.Application, d.Environment); err != nil {
		return err
	}
	in, decision, err := s.admit(ctx, nil, d, p)
	if err != nil {
		if me := (*manent.Error)(nil); errors.As(err, &me) && len(me.Fields) > 0 {
			return fmt.Errorf("%s: %s", me.Message, me.Fields[0].Message)
		}
		return err
	}
	in.ID = id
	if _, err := s.eng.Submit(ctx, in, decision); err != nil {
		return err
	}
	s.log.Info("schedule tick submitted a deploy", "schedule", sc.ID, "deploy", id, "tick", at)
	return nil
}

func (s *Server) handleSchedules(w http.ResponseWriter, r *http.Request) {
	p, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	scope, err := s.readScope(p, r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	all, err := s.st.Schedules(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := SchedulesResult{Items: []store.Schedule{}}
	for _, sc := range all {
		if !scope.has(sc.Application, sc.Environment) {
			continue
		}
		if s.cfg.Guard.Authorize(p, PermRead, sc.Application, sc.Environment) == nil {
			out.Items = append(out.Items, sc)
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
	if errors.Is(err, store.ErrNotFound) || (err == nil && sc.DeletedAt != nil) {
		writeError(w, r, s.log, manent.Errorf(manent.ENotFound, "schedule %s not found", r.PathValue("id")))
		return
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if err := s.cfg.Guard.Authorize(p, PermSchedule, sc.Application, sc.Environment); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if err := s.eng.DeleteSchedule(r.Context(), sc.ID); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	s.audit(r.Context(), r, p, "schedule.delete", sc.ID, "accepted", "")
	w.WriteHeader(http.StatusNoContent)
}
