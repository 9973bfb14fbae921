// Package store holds manent's application tables — deployments, the steps
// shown to users, events (log lines, state and step changes), the
// inventory and the web UI's signed-out sessions — on SQLite (modernc.org/sqlite, the default) or PostgreSQL.
//
// The tables live in the same database as DBOS's system tables, so a
// submission can insert its deployment row and enqueue its workflow in one
// transaction. Migrations are embedded and run on both engines.
//
// It imports pkg/manent and pkg/clusterstate (stored cluster reports).
package store
