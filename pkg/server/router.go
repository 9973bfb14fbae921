package server

import (
	"context"
	"net/http"

	"github.com/manent-io/manent/pkg/manent"
)

// route is how one route of the API is served: the checks its handler
// runs behind, in this order — the credential (401), then the query
// parameters (400), then the body's type (415) — so that a client without
// a credential learns nothing of a route's validation. Every route goes
// through Server.handle; none is registered on the mux directly.
type route struct {
	// Pattern is the route's http.ServeMux pattern.
	Pattern string
	// Unauthenticated says why the route does not ask for a credential
	// before its other checks; "" (every route but a few) asks first.
	Unauthenticated string
	// Params are the query parameters the route reads; any other, or one
	// given twice, is a 400 naming it (and the closest known one).
	Params []string
	// AnyParams says why the route reads the query itself; "" (every
	// route but the web UI's) refuses a parameter not in Params.
	AnyParams string
	// JSON: a body must say it is JSON (jsonBody), else 415.
	JSON bool
}

// handle registers h behind rt's checks.
func (s *Server) handle(rt route, h http.HandlerFunc) {
	next := h
	if rt.JSON {
		next = jsonBody(next)
	}
	if rt.AnyParams == "" {
		next = query(next, rt.Params...)
	}
	if rt.Unauthenticated == "" {
		next = s.authenticated(next)
	}
	s.routeList = append(s.routeList, rt)
	s.mux.HandleFunc(rt.Pattern, next)
}

// identityKey holds, in a request's context, the identity authenticated
// serves it as.
type identityKey struct{}

// authenticated serves next to an authenticated caller only (401
// otherwise); the handler's own authenticate reads the identity found
// here instead of checking the credential again.
func (s *Server) authenticated(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Context().Value(identityKey{}).(manent.Identity); ok {
			next(w, r) // followLogs serves its stream through the mux again
			return
		}
		p, ok := s.authenticate(w, r)
		if !ok {
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, p)))
	}
}
