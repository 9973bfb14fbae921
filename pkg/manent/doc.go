// Package manent holds the domain types of the deploy orchestrator: the
// deployment and its states, the recorded steps, the plan, the governance
// decision and the one domain error with its code.
//
// It imports nothing of this module: every adapter (store, engine, HTTP
// server and client, CLI, plugins) depends on it, never on each other.
package manent
