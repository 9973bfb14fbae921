package server

import (
	"net/http"

	"github.com/manent-io/manent/pkg/api"
)

// routesWorkers registers GET /api/v1/workers (SPEC §11.3).
func (s *Server) routesWorkers() {
	s.handle(route{Pattern: "GET /api/v1/workers"}, s.handleWorkers)
}

// handleWorkers lists the workers; reading them needs deployment.read on
// every application and environment (what a worker runs spans them all).
func (s *Server) handleWorkers(w http.ResponseWriter, r *http.Request) {
	p, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	if err := s.cfg.Guard.Authorize(p, PermRead, "", ""); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	ws, err := s.eng.Workers(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := api.WorkersResult{Items: make([]api.Worker, len(ws))}
	for i, wk := range ws {
		out.Items[i] = wireWorker(wk)
	}
	writeJSON(w, http.StatusOK, out)
}
