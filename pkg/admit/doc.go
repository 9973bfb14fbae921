// Package admit decides whether a deploy may be accepted and what exactly it
// will run: "descriptor + identity → effective deploy + decision + plan".
// It runs SPEC §3 checks 2 to 6 — permissions, sources and URLs, environment
// configuration, governance, plan — and returns the plan.Input the engine
// runs, with the governance decision.
//
// It is the one admission path: the HTTP submit handler and its dry run
// (`manent validate`), recurring-schedule ticks, `manent rollback` and the
// web UI all call it, and the deploy's `config` step calls Reconfigure,
// which repeats checks 4 and 5 against the configuration valid when the
// deploy starts with the same code. Nothing here knows HTTP.
//
// It imports descriptor, pkg/manent, pkg/plan, pkg/envconfig,
// pkg/governance, pkg/plugin, pkg/urlpolicy, pkg/cronspec, pkg/auth (the
// permissions), pkg/store and pkg/suggest (the "did you mean" of a
// mistyped plugin).
package admit
