package cli_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// The fake server below answers the REST API (SPEC §7) with canned deploys so
// the commands' rendering, polling and exit codes can be tested before
// pkg/server is wired; server-backed scripts replace it with the real one.
//
// Submitting a descriptor whose version is "fail" or "slow" creates dpl_fail
// or dpl_slow, anything else dpl_ok. Each GET of a deploy moves it one state
// further along its script, so following it never needs to sleep:
//
//	dpl_ok      ENQUEUED → PENDING (secrets done) → SUCCESS
//	dpl_fail    PENDING → ERROR, step "deploy" failed, rollback completed
//	dpl_cancel  CANCELLED
//	dpl_slow    AWAITING_APPROVAL for ever
const fakeToken = "test-token"

type fakeServer struct {
	mu    sync.Mutex
	polls map[string]int // GETs of a deploy so far
	logs  map[string]int // GETs of its log so far
}

func startFakeServer() *httptest.Server {
	fs := &fakeServer{polls: map[string]int{}, logs: map[string]int{}}
	return httptest.NewServer(fs.handler())
}

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func at(sec int) *time.Time {
	t := t0.Add(time.Duration(sec) * time.Second)
	return &t
}

func step(name string, state manent.StepState, start, end int, errText string) manent.Step {
	s := manent.Step{Name: name, State: state, Attempts: 1, StartedAt: at(start), Error: errText}
	if end >= 0 {
		s.FinishedAt = at(end)
	}
	if state == manent.StepSuccess {
		s.Output = json.RawMessage(`{"ok": true}`)
	}
	return s
}

func base(id, version string) manent.Deployment {
	return manent.Deployment{
		ID: id, Application: "billing", Environment: "prod", Version: version,
		Requester: "token:ci", CreatedAt: t0,
		Decision: &manent.Decision{Allowed: true, Source: "rules"},
		Steps:    []manent.Step{},
	}
}

// script returns the successive states of a canned deploy; the last repeats.
func script(id string) []manent.Deployment {
	switch id {
	case "dpl_ok":
		a := base(id, "1.4.2")
		a.State = manent.StateEnqueued
		a.Reason = "another deploy runs on billing/prod"
		b := base(id, "1.4.2")
		b.State, b.StartedAt = manent.StatePending, at(1)
		b.Steps = []manent.Step{step("secrets", manent.StepSuccess, 1, 2, ""), step("artifacts", manent.StepRunning, 2, -1, "")}
		c := base(id, "1.4.2")
		c.State, c.StartedAt, c.FinishedAt = manent.StateSuccess, at(1), at(65)
		c.Steps = []manent.Step{
			step("secrets", manent.StepSuccess, 1, 2, ""),
			step("artifacts", manent.StepSuccess, 2, 5, ""),
			step("deploy", manent.StepSuccess, 5, 60, ""),
			step("activation", manent.StepSuccess, 60, 65, ""),
		}
		return []manent.Deployment{a, b, c}
	case "dpl_fail":
		a := base(id, "fail")
		a.State, a.StartedAt = manent.StatePending, at(1)
		b := base(id, "fail")
		b.State, b.StartedAt, b.FinishedAt = manent.StateError, at(1), at(20)
		b.Error, b.Rollback = `step "deploy" failed: exit status 1`, manent.RollbackCompleted
		failed := step("deploy", manent.StepError, 5, 19, "exit status 1")
		failed.Attempts = 3
		b.Steps = []manent.Step{step("secrets", manent.StepSuccess, 1, 5, ""), failed, step("rollback:deploy", manent.StepSuccess, 19, 20, "")}
		return []manent.Deployment{a, b}
	case "dpl_cancel":
		a := base(id, "1.4.2")
		a.State, a.FinishedAt = manent.StateCancelled, at(3)
		return []manent.Deployment{a}
	case "dpl_slow":
		a := base(id, "slow")
		a.State, a.Reason = manent.StateAwaitingApproval, "1 approval from group:sre"
		return []manent.Deployment{a}
	}
	return nil
}

func (fs *fakeServer) next(counter map[string]int, id string) (manent.Deployment, int, bool) {
	s := script(id)
	if s == nil {
		return manent.Deployment{}, 0, false
	}
	fs.mu.Lock()
	n := counter[id]
	counter[id]++
	fs.mu.Unlock()
	return s[min(n, len(s)-1)], n, true
}

func final(id string) manent.Deployment {
	s := script(id)
	return s[len(s)-1]
}

func (fs *fakeServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/deployments", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d, err := descriptor.Parse(body)
		if err != nil {
			var e *manent.Error
			errors.As(err, &e)
			problem(w, http.StatusUnprocessableEntity, "invalid descriptor", e.Fields)
			return
		}
		if r.URL.Query().Get("dry_run") == "true" {
			valid := true
			writeJSON(w, http.StatusOK, api.SubmitResult{
				Valid: &valid,
				Plan: &manent.Plan{Steps: []manent.PlanStep{
					{Name: "secrets", MaxRetries: 3}, {Name: "artifacts", MaxRetries: 3},
					{Name: "deploy", MaxRetries: 3, Timeout: 10 * time.Minute}, {Name: "activation", MaxRetries: 3},
				}},
				Effective: map[string]any{"application": d.Application, "environment": d.Environment, "version": d.Version,
					"target": map[string]any{"plugin": "local"}},
			})
			return
		}
		id := "dpl_ok"
		switch d.Version {
		case "fail":
			id = "dpl_fail"
		case "slow":
			id = "dpl_slow"
		}
		writeJSON(w, http.StatusAccepted, api.SubmitResult{ID: id, State: manent.StateEnqueued})
	})
	mux.HandleFunc("GET /api/v1/deployments", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		all := []manent.Deployment{final("dpl_ok"), final("dpl_fail"), final("dpl_cancel")}
		var items []manent.Deployment
		for _, d := range all {
			if s := q.Get("state"); s != "" && string(d.State) != s {
				continue
			}
			items = append(items, d)
		}
		res := api.ListResult{Items: items}
		if q.Get("limit") == "1" && q.Get("cursor") == "" && len(items) > 1 {
			res = api.ListResult{Items: items[:1], NextCursor: "c2"}
		}
		if q.Get("cursor") == "c2" {
			res = api.ListResult{Items: items[1:2]}
		}
		writeJSON(w, http.StatusOK, res)
	})
	mux.HandleFunc("GET /api/v1/deployments/{id}", func(w http.ResponseWriter, r *http.Request) {
		d, _, ok := fs.next(fs.polls, r.PathValue("id"))
		if !ok {
			problem(w, http.StatusNotFound, "deployment "+r.PathValue("id")+" not found", nil)
			return
		}
		writeJSON(w, http.StatusOK, d)
	})
	mux.HandleFunc("GET /api/v1/deployments/{id}/steps", func(w http.ResponseWriter, r *http.Request) {
		if script(r.PathValue("id")) == nil {
			problem(w, http.StatusNotFound, "deployment "+r.PathValue("id")+" not found", nil)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"steps": final(r.PathValue("id")).Steps})
	})
	mux.HandleFunc("GET /api/v1/deployments/{id}/logs", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		_, n, ok := fs.next(fs.logs, id)
		if !ok {
			problem(w, http.StatusNotFound, "deployment "+id+" not found", nil)
			return
		}
		lines := []manent.LogLine{
			{Seq: 1, Time: *at(1), Step: "secrets", Text: "resolved 2 secrets"},
			{Seq: 2, Time: *at(2), Step: "artifacts", Text: "downloading"},
			{Seq: 3, Time: *at(5), Step: "deploy", Text: "unpacked into releases/1.4.2"},
		}
		state := manent.StatePending
		if n >= 1 {
			state = final(id).State
		} else {
			lines = lines[:2]
		}
		writeJSON(w, http.StatusOK, api.LogsResult{Lines: lines, State: state})
	})
	mux.HandleFunc("POST /api/v1/deployments/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if script(id) == nil {
			problem(w, http.StatusNotFound, "deployment "+id+" not found", nil)
			return
		}
		d := final(id)
		if d.State.Final() {
			problem(w, http.StatusConflict, "deployment "+id+" is already "+string(d.State), nil)
			return
		}
		writeJSON(w, http.StatusOK, d)
	})
	mux.HandleFunc("GET /api/v1/inventory", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, api.InventoryResult{Items: []manent.InventoryEntry{{
			Application: "billing", Environment: "prod",
			Current:     &manent.Release{DeploymentID: "dpl_ok", Version: "1.4.2", FinishedAt: at(65)},
			LastFailure: &manent.Release{DeploymentID: "dpl_fail", Version: "fail", FinishedAt: at(20), Error: `step "deploy" failed: exit status 1`, Rollback: "completed"},
		}}})
	})

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+fakeToken {
			problem(w, http.StatusUnauthorized, "missing or invalid bearer token", nil)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/api/v1/deployments/dpl_broken") {
			problem(w, http.StatusInternalServerError, "database is locked", nil)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func problem(w http.ResponseWriter, status int, title string, fields []manent.FieldError) {
	w.Header().Set("Content-Type", api.ProblemContentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.Problem{Title: title, Status: status, Errors: fields})
}
