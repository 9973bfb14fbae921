package server

import (
	"net/http"

	"github.com/manent-io/manent/pkg/version"
)

// handleVersion answers the server's build to any authenticated caller
// (`manent version` prints it beside the CLI's).
func (s *Server) handleVersion(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.authenticate(w, r); !ok {
		return
	}
	writeJSON(w, http.StatusOK, wireVersion(version.Get()))
}
