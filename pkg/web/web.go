package web

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/budget"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// ContentSecurityPolicy is sent with every answer of the UI: scripts and
// styles from the server's own files only, no inline script or style.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Guard is what the UI asks of the server's authentication and RBAC
// (server.AuthGuard satisfies it).
type Guard interface {
	Authenticate(ctx context.Context, authorization string) (manent.Identity, error)
	Authorize(p manent.Identity, permission, application, environment string) error
}

// AuditLog is the audit log the API writes too (store.Store satisfies it).
type AuditLog interface {
	AppendAudit(ctx context.Context, e store.AuditEntry) error
}

// Config configures the UI.
type Config struct {
	// API is the HTTP API handler (pkg/server): the UI calls it in process
	// with the session's bearer credential.
	API http.Handler
	// Guard authenticates a session's credential and answers which
	// buttons to show; the API still decides every action.
	Guard Guard
	// Secret keys the session cookies (LoadSecret).
	Secret []byte
	// Sessions records signed-out sessions in the database all workers
	// share, and is asked on every request with a session.
	Sessions Sessions
	// Audit is the audit log the UI records sign-ins and sign-outs in
	// (the API records everything else).
	Audit AuditLog
	// OIDC, when it has a ClientID, offers sign-in through the issuer.
	OIDC *auth.OIDCConfig
	// HTTPClient talks to the OIDC issuer (nil: auth.IssuerClient, the
	// outbound policy of auth.oidc.issuer).
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// SignInsPerMinute is the refused sign-ins a client address may make
	// in a minute before its sign-ins are answered 429
	// (limits.sign_ins_per_minute; 0: DefaultSignInsPerMinute).
	SignInsPerMinute int
	// Proxies are the reverse proxies whose X-Forwarded-For names the
	// client of the sign-in limit (trusted_proxies; empty: none).
	Proxies budget.Proxies
	// PathPrefix is the path the browser reaches the UI under when a
	// reverse proxy mounts it there and strips it (web.path_prefix, e.g.
	// "/manent"; "": the UI is at the root of its host). The UI still
	// serves its routes at /, and writes every address it sends the
	// browser (links, forms, redirects, streams, the OIDC redirect URL)
	// under the prefix; its cookies are scoped to it (cookiePath).
	PathPrefix string
}

// Handler serves the web UI.
type Handler struct {
	cfg   Config
	api   http.Handler
	guard Guard
	seal  *sealer
	log   *slog.Logger
	now   func() time.Time
	mux   *http.ServeMux
	pages map[string]*template.Template
	// static is the embedded static files with their ETags.
	static http.Handler
	// sessions is Config.Sessions.
	sessions Sessions
	// auditLog is Config.Audit.
	auditLog AuditLog
	// signIns bounds the refused sign-ins of each client address.
	signIns *budget.Limiter
	// prefix is Config.PathPrefix.
	prefix string

	oidcMu sync.Mutex
	oidc   *oidcClient
}

// New returns the UI handler.
func New(cfg Config) (*Handler, error) {
	if cfg.API == nil || cfg.Guard == nil || cfg.Sessions == nil || cfg.Audit == nil {
		return nil, errors.New("web: API, Guard, Sessions and Audit are required")
	}
	if err := CheckPathPrefix(cfg.PathPrefix); err != nil {
		return nil, fmt.Errorf("web: path prefix: %w", err)
	}
	seal, err := newSealer(cfg.Secret)
	if err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil && cfg.OIDC != nil {
		cfg.HTTPClient = auth.IssuerClient(*cfg.OIDC) // the outbound policy of auth.oidc.issuer
	}
	h := &Handler{cfg: cfg, api: cfg.API, guard: cfg.Guard, seal: seal, sessions: cfg.Sessions, auditLog: cfg.Audit, log: cfg.Logger, now: cfg.Now, mux: http.NewServeMux(),
		signIns: newSignInLimiter(cfg.SignInsPerMinute, cfg.Now), prefix: cfg.PathPrefix}
	if h.pages, err = parsePages(h.prefix); err != nil {
		return nil, err
	}
	h.static = http.StripPrefix("/static/", staticHandler(embeddedStatic()))
	h.routes()
	return h, nil
}

func (h *Handler) routes() {
	h.mux.Handle("GET /static/", h.static)
	h.mux.HandleFunc("GET /login", h.handleLoginForm)
	h.mux.HandleFunc("POST /login", h.handleLogin)
	h.mux.HandleFunc("GET /login/oidc", h.handleOIDCStart)
	h.mux.HandleFunc("GET /login/callback", h.handleOIDCCallback)
	h.mux.HandleFunc("GET /logout", h.page("logout", h.pageLogout))
	h.mux.HandleFunc("POST /logout", h.handleLogout)

	h.mux.HandleFunc("GET /{$}", h.page("activity", h.pageActivity))
	h.mux.HandleFunc("GET /events", h.proxyStream(func(r *http.Request) string { return "/api/v1/events" }))
	h.mux.HandleFunc("GET /deployments/{id}", h.page("deployment", h.pageDeployment))
	h.mux.HandleFunc("GET /deployments/{id}/events", h.proxyStream(func(r *http.Request) string {
		return "/api/v1/deployments/" + url.PathEscape(r.PathValue("id")) + "/events"
	}))
	h.mux.HandleFunc("POST /deployments/{id}/approve", h.handleAction("approve"))
	h.mux.HandleFunc("POST /deployments/{id}/reject", h.handleAction("reject"))
	h.mux.HandleFunc("POST /deployments/{id}/cancel", h.handleAction("cancel"))
	h.mux.HandleFunc("GET /environments", h.page("environments", h.pageEnvironments))
	h.mux.HandleFunc("GET /environments/{application}/{environment}", h.page("history", h.pageHistory))
	h.mux.HandleFunc("GET /clusters", h.page("clusters", h.pageClusters))
	h.mux.HandleFunc("GET /clusters/{cluster}", h.page("cluster", h.pageCluster))
	h.mux.HandleFunc("GET /schedules", h.page("schedules", h.pageSchedules))
	h.mux.HandleFunc("GET /audit", h.page("audit", h.pageAudit))
	h.mux.HandleFunc("/", h.handleNotFound)
}

// handleNotFound answers an address with no page: 404, with the
// navigation for a signed-in user. The message never repeats the address —
// a link to the real server must not make it show an attacker's words.
func (h *Handler) handleNotFound(w http.ResponseWriter, r *http.Request) {
	v, err := h.signedIn(r)
	if err != nil && !errors.Is(err, errNoSession) {
		h.uncheckedSession(w, r, err)
		return
	}
	if allow := h.allowed(r); len(allow) > 0 {
		// The address is the UI's, the method is not: 405, as the API
		// answers, with the methods it takes (repeating neither the address nor
		// the method).
		w.Header().Set("Allow", strings.Join(allow, ", "))
		h.renderError(w, r, v, http.StatusMethodNotAllowed, "This address does not take that method: it answers "+strings.Join(allow, ", ")+". Check the link or the form that sent it.")
		return
	}
	msg := "There is no page at this address. Check the link, or sign in and start from the activity page."
	if v != nil {
		msg = "There is no page at this address. Check the link, or start from a page of the navigation above."
	}
	if h.prefix != "" && (r.URL.Path == h.prefix || strings.HasPrefix(r.URL.Path, h.prefix+"/")) {
		// The proxy passed the prefix on: every page would be a 404.
		h.log.Warn("web: a request still has the path prefix (web.path_prefix): the reverse proxy must strip it (docs/operations.md, \"Behind a reverse proxy\")",
			"path", manent.ClipText(r.URL.Path, 200))
		msg = "There is no page at this address: it still starts with " + h.prefix + ", which the reverse proxy in front of manent should remove (web.path_prefix). Tell the server's operator."
	}
	h.renderError(w, r, v, http.StatusNotFound, msg)
}

// uiMethods are the methods a UI route may be registered with, in the
// order an Allow header names them.
var uiMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// allowed returns the methods some route other than the catch-all serves
// r's path with, nil when none does (the path has no page). The mux's own
// 405 cannot answer: the catch-all "/" matches every method.
func (h *Handler) allowed(r *http.Request) []string {
	var allow []string
	for _, m := range uiMethods {
		if m == r.Method {
			continue
		}
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := h.mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	return allow
}

// ServeHTTP serves the UI with its security headers.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	if secure(r) {
		hd.Set("Strict-Transport-Security", "max-age=31536000")
	}
	h.mux.ServeHTTP(w, r)
}

// viewer is the signed-in user of a request.
type viewer struct {
	Identity manent.Identity
	sess     session
}

// signedIn returns the request's user, re-authenticating the session's
// credential exactly as the API does; errNoSession when there is none (see
// readSession), another error when the revocation check failed.
func (h *Handler) signedIn(r *http.Request) (*viewer, error) {
	s, err := h.readSession(r)
	if err != nil {
		return nil, err
	}
	p, err := h.guard.Authenticate(r.Context(), "Bearer "+s.Credential)
	if err != nil {
		return nil, errNoSession
	}
	return &viewer{Identity: p, sess: s}, nil
}

// sessionUnchecked is the message of a request whose session could not be
// checked against the signed-out sessions.
const sessionUnchecked = "Your session could not be checked: the database did not answer. Try again in a moment."

// uncheckedSession logs a failed revocation check and answers 503.
func (h *Handler) uncheckedSession(w http.ResponseWriter, r *http.Request, err error) {
	h.log.Error("web: session revocation check", "path", r.URL.Path, "error", err)
	h.renderError(w, r, nil, http.StatusServiceUnavailable, sessionUnchecked)
}

// can reports whether the viewer holds permission on application/environment.
func (h *Handler) can(v *viewer, perm auth.Permission, app, env string) bool {
	return h.guard.Authorize(v.Identity, string(perm), app, env) == nil
}

// apiError is an error answer of the API.
type apiError struct {
	Status int
	Detail string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s", e.Status, e.Detail) }

// call runs one API request in process as v and decodes its JSON answer into out.
func (h *Handler) call(r *http.Request, v *viewer, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(r.Context(), method, path, rd)
	if err != nil {
		return err
	}
	req.RemoteAddr = r.RemoteAddr
	// The API's per-address limits name the same client as the UI's.
	if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
		req.Header["X-Forwarded-For"] = xff
	}
	req.Header.Set("Authorization", "Bearer "+v.sess.Credential)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if id := r.Header.Get("X-Request-Id"); id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	h.api.ServeHTTP(rec, req)
	if rec.status >= 400 {
		var p api.Problem
		if json.Unmarshal(rec.body.Bytes(), &p) != nil || p.Title == "" {
			p.Detail = strings.TrimSpace(rec.body.String())
		}
		msg := p.Detail
		if msg == "" {
			msg = p.Title
		}
		// The fields say what is wrong (which name, by which rule).
		for i, f := range p.Errors {
			if i == maxFieldErrors {
				msg += fmt.Sprintf("; and %d more", len(p.Errors)-i)
				break
			}
			msg += "; " + strings.TrimPrefix(f.Path+": ", ": ") + f.Message
		}
		return &apiError{Status: rec.status, Detail: msg}
	}
	if out != nil {
		if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
			return fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return nil
}

// maxFieldErrors bounds the field errors of an API answer an error page
// lists.
const maxFieldErrors = 5

// recorder is the in-process ResponseWriter of call.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}

// proxyStream serves an SSE stream of the API (path(r)) to a signed-in
// browser: EventSource cannot send a bearer token, so the UI adds the
// session's. Last-Event-ID and the query pass through: a reconnect resumes.
// The stream checks the session again while it is open (streamRecheck)
// and ends when it was signed out or expired.
func (h *Handler) proxyStream(path func(*http.Request) string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := h.signedIn(r)
		if err != nil && !errors.Is(err, errNoSession) {
			h.log.Error("web: session revocation check", "path", r.URL.Path, "error", err)
			writeProblem(w, http.StatusServiceUnavailable, sessionUnchecked)
			return
		}
		if err != nil {
			// 401 makes EventSource stop; the page then offers to sign in.
			detail := "this event stream of the web UI needs a session: sign in at " + h.prefix +
				"/login (an API client reads /api/v1/… with Authorization: Bearer <token>)"
			if c, cerr := h.cookie(r, sessionCookie); cerr == nil && c.Value != "" {
				detail = "the session has ended (signed out, expired, or its token is no longer accepted): sign in again at " + h.prefix + "/login"
			}
			writeProblem(w, http.StatusUnauthorized, detail)
			return
		}
		r2 := r.Clone(auth.WithRecheck(r.Context(), h.streamRecheck(v.sess)))
		r2.URL.Path, r2.URL.RawPath = path(r), ""
		r2.RequestURI = ""
		r2.Header.Del("Cookie")
		r2.Header.Set("Authorization", "Bearer "+v.sess.Credential)
		h.api.ServeHTTP(w, r2)
	}
}

// writeProblem answers an error of what is not a page (an event stream
// refused before the API sees it, a missing static file) with a
// problem+json document, as the API answers: a script or a <link> reads
// it, no one sees a page.
func writeProblem(w http.ResponseWriter, status int, detail string) {
	body, _ := json.Marshal(api.Problem{Title: http.StatusText(status), Status: status, Detail: detail})
	w.Header().Set("Content-Type", api.ProblemContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// home is the address of the activity page as the browser reaches it.
func (h *Handler) home() string { return h.prefix + "/" }

// localPath returns next when it is a page of this UI as the browser
// reaches it (a path on this site, under the path prefix when there is
// one), else the activity page: a sign-in never sends the browser to
// another site, nor, on a host shared under a prefix, to another
// application of the host.
func (h *Handler) localPath(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return h.home()
	}
	u, err := url.Parse(next)
	if err != nil || u.Host != "" || u.Scheme != "" {
		return h.home()
	}
	if h.prefix != "" {
		// A browser resolves dot segments (also %2e%2e) and reads a
		// backslash as a slash: /manent/../other is /other.
		if !strings.HasPrefix(next, h.prefix+"/") || strings.Contains(next, "\\") || strings.ContainsAny(u.Path, "\\") {
			return h.home()
		}
		for _, seg := range strings.Split(u.Path, "/") {
			if seg == "." || seg == ".." {
				return h.home()
			}
		}
	}
	return next
}

// CheckPathPrefix says what is wrong with p as web.path_prefix: "" or a
// path of letters, digits and -._~ segments, starting with / and without
// a trailing slash, a query or dot segments ("/manent", "/tools/manent").
func CheckPathPrefix(p string) error {
	if p == "" {
		return nil
	}
	switch {
	case len(p) > maxPathPrefix:
		return fmt.Errorf("longer than %d characters", maxPathPrefix)
	case !strings.HasPrefix(p, "/"):
		return errors.New("must start with / (e.g. /manent)")
	case p == "/":
		return errors.New("/ is the root: leave the key out instead")
	case strings.HasSuffix(p, "/"):
		return fmt.Errorf("must not end with / (write %s)", strings.TrimRight(p, "/"))
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return errors.New("has an empty segment (//)")
		case ".", "..":
			return fmt.Errorf("has a %q segment", seg)
		}
		for _, c := range seg {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-._~", c)) {
				return fmt.Errorf("has %q: a prefix is letters, digits, -._~ and / only (no query, fragment or escapes)", string(c))
			}
		}
	}
	return nil
}

// maxPathPrefix bounds web.path_prefix.
const maxPathPrefix = 200
