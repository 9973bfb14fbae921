// Package engine runs each deploy as a DBOS durable workflow: one queue
// partitioned by <application>/<environment> (one deploy per environment at
// a time across every worker), one DBOS step per plan step with retries and
// permanent errors, an app-level cancel checked between steps, recovery of
// interrupted workflows, and the conclusion (cleanup, outcome attributes,
// inventory).
//
// It imports pkg/manent, pkg/store, pkg/plugin, pkg/artifact, pkg/plan and
// descriptor; it knows nothing of HTTP.
package engine
