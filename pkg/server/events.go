package server

// routesEvents registers the routes of Server-Sent Events streams and activity (GET /api/v1/deployments/{id}/events, GET /api/v1/events, GET /api/v1/activity).
func (s *Server) routesEvents() {}
