// Package api holds the wire types of manent's REST API (SPEC §7) and the Go
// client that the CLI, the agent and the tests use to talk to manent-server.
//
// It imports pkg/manent, pkg/clusterstate (cluster reports) and pkg/retry
// (the backoff between attempts); the server
// (pkg/server) speaks the same types.
package api
