// Package governance decides whether, and under which conditions, a deploy
// may run (SPEC §3 check 5): freeze windows, mandatory promotion, approvals
// and change management.
//
// The rules come either from a governance.yaml file (LoadRules, ParseRules)
// or from a Rego policy evaluated with OPA (LoadRego, ParseRego). Both read
// the same Input and give the same Decision, and both satisfy Decider, the
// one interface the server uses; FromConfig builds it from the server
// configuration. ActiveFreeze answers the narrower question the engine asks
// again when a deploy starts and before each rollout wave.
//
// The package only decides: it never waits, stores or notifies. The waiting
// workflows (AWAITING_APPROVAL, change tickets) belong to the engine.
//
// It imports pkg/manent, pkg/yamlvalue, pkg/suggest (a misspelled key of a
// Rego decision) and descriptor of this module, OPA, and embeds the
// time zone database (time/tzdata) so recurring windows work on minimal
// machines.
package governance
