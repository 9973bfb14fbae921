// Package budget holds the per-key token budget the server's limits share
// (limits.submissions_per_minute, limits.refusals_per_minute,
// limits.sign_ins_per_minute, limits.bearer_failures_per_minute), and the
// key a client address counts by (ClientKey): a Limiter gives each key perMin tokens a
// minute; past them it says how long until the next, and, for the limits
// that answer 429 until the budget is whole again, when a stretch of 429s
// begins and ends.
//
// It imports nothing of this module.
package budget
