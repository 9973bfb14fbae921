// Package engine runs each deploy as a DBOS durable workflow: one queue
// partitioned by <application>/<environment> (one deploy per environment at
// a time across every worker), one DBOS step per plan step with retries and
// permanent errors, an app-level cancel checked between steps, recovery of
// interrupted workflows, and the conclusion (cleanup, outcome attributes,
// inventory).
//
// The config step, schedule ticks and wave freezes go through pkg/admit,
// the one admission path, so a deploy is checked by the same code when it
// is submitted and when it starts.
//
// It imports pkg/manent, pkg/plan, pkg/admit, pkg/store, pkg/plugin,
// pkg/artifact, pkg/egress (health checks), pkg/envconfig, pkg/itsm,
// pkg/notify, pkg/urlpolicy, pkg/cronspec, pkg/retry (backoff of its own
// loops), pkg/version (the worker's version), pkg/regularfile (`file:`
// secrets) and descriptor; it knows nothing of HTTP.
package engine
