// Package web is manent-server's web UI (SPEC §11.4): server-rendered pages
// (html/template, embedded with go:embed) for activity, deploys,
// environments, clusters, schedules and the audit log, a small embedded
// script that follows the SSE streams, and sign-in with a static token or
// OIDC (authorization code flow with PKCE).
//
// The UI is a client of the API in the same process: a session (a sealed
// cookie) holds the bearer credential the user signed in with, and every
// page and button calls the API handler with it, so authentication, RBAC,
// audit and the why-it-waits texts are the API's own; the UI itself
// writes only its sign-ins and sign-outs to the audit log (Config.Audit).
// The API never sees the cookie: it keeps accepting bearer tokens only.
// Each session has a random id; sign-out records it as revoked through
// Config.Sessions (the store, shared by every worker), and every request
// checks it; an event stream checks it again while it is open
// (auth.Recheck) and ends once the session is signed out or expired.
//
// It imports descriptor (the name rule of a filter), pkg/api, pkg/auth,
// pkg/budget (the sign-in limit), pkg/manent, pkg/clusterstate, pkg/store,
// pkg/reltime (the CLI's relative times), github.com/coreos/go-oidc and
// golang.org/x/oauth2.
package web
