// Package urlpolicy decides which URLs manent may fetch or call (SPEC §3
// check 3): artifact URLs must match `artifacts.sources`, callback URLs must
// match `callbacks.allow` and must not reach private, loopback, link-local
// or cloud metadata addresses unless the allow-list names them. Callbacks
// are checked at submission and again when they are sent. Outbound is the
// allow-list of one use of outbound HTTP in general (artifacts, health
// checks, the http plugin, callbacks, …); pkg/egress enforces its compiled
// Policy on every request, redirect hop and address actually dialed.
//
// Patterns are URLs with globs: "*" matches within one path segment (or
// label run of a host, or a port), "**" matches any rest of the path,
// slashes included, and "scheme://**" matches every URL of that scheme.
// Matching is on a canonical form (lower-case scheme and host, explicit
// port, decoded path without query or fragment), and URLs with credentials
// or ".." segments are refused, so a pattern cannot be escaped by spelling.
//
// Redact is how a URL is quoted in errors and logs: without the user
// information, query and fragment that carry credentials and tokens.
//
// Check errors are *manent.Error with code EInvalid (422). The package
// imports pkg/manent only.
package urlpolicy
