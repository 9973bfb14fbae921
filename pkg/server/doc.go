// Package server is manent-server's HTTP API (SPEC §7): submission (it
// parses the descriptor and authenticates; pkg/admit runs the other checks
// of SPEC §3), reads, cancel, approvals, inventory, history, rollback (a
// new submission through pkg/admit), DORA, health and metrics.
// Every error is application/problem+json; every route is authenticated
// and authorised.
//
// It imports pkg/manent, pkg/api (wire types), pkg/admit, pkg/auth,
// pkg/budget (the submission and refusal limits), pkg/engine, pkg/store,
// pkg/clusterstate (agent reports), pkg/cronspec (next ticks), pkg/plan
// (the stored workflow input a rollback deploys again), pkg/retry (the
// backoff of an event stream's failed read), pkg/suggest (the
// "did you mean" of an unknown query parameter), pkg/version (GET
// /api/v1/version) and descriptor.
package server
