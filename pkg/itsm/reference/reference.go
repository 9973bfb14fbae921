// Package reference is a small ITSM server speaking manent's change
// protocol (docs/itsm.md), for tests and local trials: changes live in
// memory and are approved or rejected with POST /changes/{id}/approve|reject.
//
// It imports pkg/itsm only.
package reference

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/manent-io/manent/pkg/itsm"
)

// Server is the reference ITSM.
type Server struct {
	mu      sync.Mutex
	changes map[string]*itsm.Change
	byDep   map[string]string
	n       int
	mux     *http.ServeMux
}

// New returns an empty reference ITSM.
func New() *Server {
	s := &Server{changes: map[string]*itsm.Change{}, byDep: map[string]string{}, mux: http.NewServeMux()}
	s.mux.HandleFunc("POST /changes", s.open)
	s.mux.HandleFunc("GET /changes/{id}", s.get)
	s.mux.HandleFunc("GET /changes", s.list)
	s.mux.HandleFunc("POST /changes/{id}/{action}", s.act)
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) open(w http.ResponseWriter, r *http.Request) {
	var req itsm.Request
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || req.DeployID == "" {
		reply(w, http.StatusBadRequest, map[string]string{"error": "want a JSON change request with deploy_id"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.byDep[req.DeployID]; ok { // idempotent per deploy
		reply(w, http.StatusOK, s.changes[id])
		return
	}
	s.n++
	c := &itsm.Change{ID: fmt.Sprintf("CHG%04d", s.n), State: itsm.Pending}
	s.changes[c.ID], s.byDep[req.DeployID] = c, c.ID
	reply(w, http.StatusCreated, c)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.changes[r.PathValue("id")]
	if !ok {
		reply(w, http.StatusNotFound, map[string]string{"error": "no such change"})
		return
	}
	reply(w, http.StatusOK, c)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []*itsm.Change{}
	for _, c := range s.changes {
		out = append(out, c)
	}
	reply(w, http.StatusOK, out)
}

func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	var body struct {
		By      string `json:"by"`
		Outcome string `json:"outcome"`
	}
	_ = json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body)
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.changes[r.PathValue("id")]
	if !ok {
		reply(w, http.StatusNotFound, map[string]string{"error": "no such change"})
		return
	}
	switch r.PathValue("action") {
	case "approve":
		if c.State == itsm.Pending {
			c.State, c.By = itsm.Approved, body.By
		}
	case "reject":
		if c.State == itsm.Pending {
			c.State, c.By = itsm.Rejected, body.By
		}
	case "close":
		c.State, c.Outcome = itsm.Closed, body.Outcome
	default:
		reply(w, http.StatusNotFound, map[string]string{"error": "unknown action"})
		return
	}
	reply(w, http.StatusOK, c)
}

// Get returns a copy of a change (for tests).
func (s *Server) Get(id string) (itsm.Change, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.changes[id]
	if !ok {
		return itsm.Change{}, false
	}
	return *c, true
}

// Set sets a change's state (for tests).
func (s *Server) Set(id, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.changes[id]; ok {
		c.State = state
	}
}
