// Package egress is manent's one HTTP client for outbound requests (SPEC
// §11.1 "Outbound requests"): artifact downloads, health checks, the http
// plugin, callbacks, chat, ITSM, the environment configuration service and
// OIDC discovery all send through a client from New, each with the policy
// of its use.
//
// A client from New
//   - checks every request's URL against the use's allow-list
//     (urlpolicy.Outbound), the first one and every redirect hop, so a
//     redirect cannot leave the policy (artifact hops are checked against
//     artifacts.sources);
//   - follows at most MaxRedirects redirects (none by default: the 3xx is
//     the answer);
//   - resolves each host itself and connects only to addresses the policy
//     permits, checking the address again in the dialer's Control hook just
//     before connecting, so private, loopback, link-local and cloud
//     metadata addresses are refused at dial time, DNS rebinding included,
//     unless the policy allows them for this use;
//   - never uses a proxy from the environment (a proxy would resolve and
//     connect for us).
//
// A refusal is a *RefusedError in the error chain (IsRefused): retrying
// cannot help. No other package of the module may build its own outbound
// client or use http.DefaultClient; a test of this package scans the source
// for that.
//
// It imports pkg/urlpolicy and pkg/manent.
package egress
