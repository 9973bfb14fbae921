// Package auth turns a request's bearer token into an Identity and decides
// what that identity may do (SPEC §3 check 2, §8.1 auth and rbac).
//
// An Authenticator accepts static tokens, stored only as hex SHA-256 hashes
// and compared in constant time, and OIDC JWTs, verified with coreos/go-oidc
// against the issuer's discovery document and JWKS. Discovery is lazy: the
// issuer may be down when the server starts, so the first request that needs
// it tries, and a failed attempt is retried at most once per five seconds.
// A Policy, built from the rbac rules, grants permissions to identities and
// groups on application/environment (or, for agent.report, cluster) patterns.
// A Recheck, carried in a request's context, is what a long-lived answer
// (an event stream) must check again while it is open besides the bearer
// credential: the web UI's session.
//
// Errors the HTTP layer maps are *manent.Error with codes EUnauthorized
// (401), EForbidden (403), EUnavailable (503) and, for configuration
// mistakes, EInvalid. No message ever contains the presented token.
//
// The package imports pkg/manent, pkg/egress and pkg/urlpolicy (the OIDC
// issuer is reached through an egress client) and, from outside this
// module, go-oidc and go-jose only; it knows nothing of HTTP routes or
// storage.
package auth
