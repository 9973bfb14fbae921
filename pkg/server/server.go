package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/manent-io/manent/pkg/admit"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/budget"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// MaxBody bounds a request body (SPEC: 1 MiB, 413 beyond).
const MaxBody = 1 << 20

// Config configures the HTTP API.
type Config struct {
	Engine *engine.Engine
	Guard  Guard
	Logger *slog.Logger
	// Admitter runs the submission checks (SPEC §3 checks 2–6).
	Admitter *admit.Admitter
	// SubmissionsPerMinute limits each identity's submissions (0: 120).
	SubmissionsPerMinute int
	// StreamsPerIdentity and Streams bound the event streams open at once,
	// per identity (0: DefaultStreamsPerIdentity) and in all (0:
	// DefaultStreams).
	StreamsPerIdentity, Streams int
	// RefusalsPerMinute bounds each identity's audited refusals of
	// approve, reject, cancel and agent reports (0:
	// DefaultRefusalsPerMinute).
	RefusalsPerMinute int
	// BearerFailuresPerMinute bounds each client address's refused
	// credentials (0: DefaultBearerFailuresPerMinute).
	BearerFailuresPerMinute int
	// Proxies are the reverse proxies whose X-Forwarded-For names the
	// client of the per-address limits (trusted_proxies; empty: none).
	Proxies budget.Proxies
}

// The default bounds of open event streams (limits.streams_per_identity,
// limits.streams).
const (
	DefaultStreamsPerIdentity = 200
	DefaultStreams            = 5000
)

// Server is the HTTP API.
type Server struct {
	// stopping is set by Stopping: /readyz answers 503 from then on.
	stopping atomic.Bool
	// hub fans the event streams out (sse.go); EndStreams ends them.
	hub *hub
	// forwardedUntrusted is set once a request came with an
	// X-Forwarded-For while trusted_proxies is empty (logged once).
	forwardedUntrusted atomic.Bool

	cfg   Config
	eng   *engine.Engine
	admit *admit.Admitter
	st    *store.Store
	log   *slog.Logger
	mux   *http.ServeMux
	// limiter is each identity's budget of submissions, dry runs and
	// rollbacks (limits.submissions_per_minute): one token each.
	limiter *budget.Limiter
	// refusals bounds, per identity, the refusals the audit log records
	// of the routes that audit a refusal after authentication and are not
	// bounded otherwise (approve, reject, cancel, agent reports): without
	// it one token that may only approve added one row to the audit chain
	// per request, as fast as it could send them. Each audited refusal
	// takes a token (Refused); when they are spent the identity is
	// limited: those routes answer 429 without acting, until its budget is
	// whole again (a minute at most). A stretch of 429s is recorded twice,
	// not once per answer: when it begins (the first 429) and, with how
	// many answers it held, when it ends (the identity's next request let
	// through).
	refusals *budget.Limiter
	// bearerFailures bounds, per client address, the refused credentials
	// of API requests (limitBearerFailures).
	bearerFailures *budget.Limiter
	streams        *streamLimiter
	// web serves every path outside /api/ that no API route matched (the
	// web UI, pkg/web), when mounted.
	web http.Handler
	// routeList is every route registered (handle, router.go).
	routeList []route
}

// New returns the API handler.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.SubmissionsPerMinute == 0 {
		cfg.SubmissionsPerMinute = 120
	}
	if cfg.StreamsPerIdentity == 0 {
		cfg.StreamsPerIdentity = DefaultStreamsPerIdentity
	}
	if cfg.Streams == 0 {
		cfg.Streams = DefaultStreams
	}
	if cfg.RefusalsPerMinute == 0 {
		cfg.RefusalsPerMinute = DefaultRefusalsPerMinute
	}
	if cfg.BearerFailuresPerMinute == 0 {
		cfg.BearerFailuresPerMinute = DefaultBearerFailuresPerMinute
	}
	s := &Server{cfg: cfg, eng: cfg.Engine, admit: cfg.Admitter, st: cfg.Engine.Store(), log: cfg.Logger, mux: http.NewServeMux(),
		limiter: budget.New(cfg.SubmissionsPerMinute, nil), refusals: budget.New(cfg.RefusalsPerMinute, nil),
		bearerFailures: budget.New(cfg.BearerFailuresPerMinute, nil), streams: newStreamLimiter(cfg.StreamsPerIdentity, cfg.Streams)}
	s.routes()
	return s
}

func (s *Server) routes() {
	s.handle(route{Pattern: "POST /api/v1/deployments", Params: []string{"dry_run"},
		Unauthenticated: "SPEC §3: the descriptor is checked before the identity; the handler authenticates after it"}, s.handleSubmit)
	s.handle(route{Pattern: "GET /api/v1/deployments", Params: []string{"application", "environment", "state", "limit", "cursor"}}, s.handleList)
	s.handle(route{Pattern: "GET /api/v1/deployments/{id}"}, s.handleStatus)
	s.handle(route{Pattern: "GET /api/v1/deployments/{id}/steps"}, s.handleSteps)
	// Each mode of the log reads its own (handleLogs checks which).
	s.handle(route{Pattern: "GET /api/v1/deployments/{id}/logs", Params: []string{"follow", "after", "limit", "last_event_id"}}, s.handleLogs)
	s.handle(route{Pattern: "POST /api/v1/deployments/{id}/cancel", JSON: true}, s.handleCancel)
	s.handle(route{Pattern: "POST /api/v1/deployments/{id}/approve", JSON: true}, s.handleApprove("approve"))
	s.handle(route{Pattern: "POST /api/v1/deployments/{id}/reject", JSON: true}, s.handleApprove("reject"))
	s.handle(route{Pattern: "GET /api/v1/inventory", Params: []string{"application", "environment"}}, s.handleInventory)
	s.handle(route{Pattern: "GET /api/v1/schedules", Params: []string{"application", "environment"}}, s.handleSchedules)
	s.handle(route{Pattern: "DELETE /api/v1/schedules/{id}"}, s.handleDeleteSchedule)
	// Each capability registers its own routes in its own file.
	s.routesEvents()
	s.routesAgent()
	s.routesAudit()
	s.routesWorkers()
	s.routesHistory()
	const probe = "a probe of the process, read by load balancers and Kubernetes: it says no more than ok or not"
	s.handle(route{Pattern: "GET /healthz", Unauthenticated: probe}, s.handleHealth)
	s.handle(route{Pattern: "GET /readyz", Unauthenticated: probe}, s.handleReady)
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector())
	s.registerMetrics(reg) // metrics.go: the families of SPEC §11.5
	// A family that cannot be read (the database does not answer) fails
	// the scrape with a 500 naming the error, and the log says it:
	// Prometheus then records the target down, not a queue that is empty.
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn), ErrorHandling: promhttp.HTTPErrorOnError})
	s.handle(route{Pattern: "GET /metrics", Unauthenticated: "Prometheus scrapes it without a credential (SPEC §11.5); it names no application"}, metrics.ServeHTTP)
	s.handle(route{Pattern: "/", Unauthenticated: "the web UI signs its pages in itself; an unknown API path is a 404 or 405 whoever asks",
		AnyParams: "the web UI's pages read their own"}, func(w http.ResponseWriter, r *http.Request) {
		if s.web != nil && r.URL.Path != "/api" && !strings.HasPrefix(r.URL.Path, "/api/") {
			s.web.ServeHTTP(w, r)
			return
		}
		if allow := s.allowed(r); len(allow) > 0 {
			writeMethodNotAllowed(w, r, allow)
			return
		}
		writeError(w, r, s.log, manent.Errorf(manent.ENotFound, "no route %s %s", r.Method, r.URL.Path))
	})
}

// allowed returns the methods an API route serves at r's path, so that a
// known path asked with another method is a 405 with Allow, not a 404 (the
// catch-all "/" route hides the mux's own 405).
func (s *Server) allowed(r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/" {
			out = append(out, m)
		}
	}
	return out
}

// Mount serves h (the web UI) at every path outside /api/ that no API
// route matches. Call it before serving. The API itself keeps
// authenticating bearer tokens only: h's sessions never reach /api/.
func (s *Server) Mount(h http.Handler) { s.web = h }

// ContentSecurityPolicy is sent with every answer of the API: it serves
// no page, so it allows nothing.
const ContentSecurityPolicy = "default-src 'none'; frame-ancestors 'none'"

// ServeHTTP serves the API with a request log and panic guard.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	r = withRequestID(r, w)
	// The client every audit entry of this request names: the address the
	// per-address limits count and the User-Agent. A request the web UI
	// makes of the API for a browser keeps the browser's.
	if _, _, ok := store.ClientOf(r.Context()); !ok {
		r = r.WithContext(store.WithClient(r.Context(), s.cfg.Proxies.ClientAddr(r), r.Header.Get("User-Agent")))
	}
	// Every answer: nothing of the server may be framed, sniffed as
	// another type or run a script — the error answers below included,
	// which a link to a page of the UI reaches too (the UI replaces the
	// policy with its pages' own).
	hd := w.Header()
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	// Someone waits for this answer: its database writes go before those
	// of running deploys (store.Interactive).
	r = r.WithContext(store.Interactive(r.Context()))
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("panic in handler", "method", r.Method, "path", r.URL.Path, "panic", v)
			writeError(sw, r, s.log, errors.New("panic"))
		}
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
			"duration", time.Since(start), "request_id", requestID(r))
	}()
	if what := targetNotText(r); what != "" {
		writeStatus(sw, http.StatusBadRequest, what)
		return
	}
	if ce := r.Header.Values("Content-Encoding"); len(ce) > 0 && !(len(ce) == 1 && strings.EqualFold(strings.TrimSpace(ce[0]), "identity")) {
		// Never inflated (no zip bomb); read as it is, it would be
		// reported as a descriptor or JSON that is not text.
		writeStatus(sw, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Encoding %s: the server reads request bodies as sent; send the body uncompressed, without Content-Encoding",
			manent.ClipText(strings.Join(ce, ", "), maxEchoed)))
		return
	}
	if len(s.cfg.Proxies) == 0 && r.Header.Get("X-Forwarded-For") != "" && s.forwardedUntrusted.CompareAndSwap(false, true) {
		s.log.Warn("requests come through a reverse proxy (X-Forwarded-For), but X-Forwarded-For is not trusted: "+
			"every client behind it counts as the proxy's one address in the limits of refused sign-ins and credentials; "+
			"name the proxy in trusted_proxies (docs/operations.md, Behind a reverse proxy)", "proxy", s.cfg.Proxies.ClientAddr(r))
	}
	if !s.limitBearerFailures(sw, r) {
		return
	}
	s.mux.ServeHTTP(sw, r)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// authenticate returns the caller or writes 401.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (manent.Identity, bool) {
	if p, ok := r.Context().Value(identityKey{}).(manent.Identity); ok {
		return p, true // authenticated (router.go) checked the credential
	}
	p, err := s.authenticateHeader(r, r.Header.Get("Authorization"))
	if err != nil {
		writeError(w, r, s.log, err)
		return manent.Identity{}, false
	}
	return p, true
}

// authenticateHeader authenticates header, an Authorization value of r; a
// credential refused takes from the budget of r's client address.
func (s *Server) authenticateHeader(r *http.Request, header string) (manent.Identity, error) {
	p, err := s.cfg.Guard.Authenticate(r.Context(), header)
	if me := (*manent.Error)(nil); err != nil && strings.TrimSpace(header) != "" && errors.As(err, &me) && me.Code == manent.EUnauthorized {
		s.bearerFailures.Refused(s.clientKey(r))
	}
	return p, err
}

// deployment loads a deploy after checking the caller may act on it.
func (s *Server) deployment(w http.ResponseWriter, r *http.Request, perm string) (*store.Record, bool) {
	rec, _, ok := s.deploymentAs(w, r, perm)
	return rec, ok
}

// deploymentAs is deployment that also returns the caller.
func (s *Server) deploymentAs(w http.ResponseWriter, r *http.Request, perm string) (*store.Record, manent.Identity, bool) {
	p, ok := s.authenticate(w, r)
	if !ok {
		return nil, p, false
	}
	rec, err := s.eng.Refresh(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		// The same answer for "absent" and "not yours" would hide existence;
		// a 404 after authentication is what operators expect.
		writeError(w, r, s.log, manent.Errorf(manent.ENotFound, "deploy %s not found", manent.ClipText(r.PathValue("id"), maxEchoed)))
		return nil, p, false
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return nil, p, false
	}
	if err := s.cfg.Guard.Authorize(p, perm, rec.Application, rec.Environment); err != nil {
		if perm != PermRead && s.cfg.Guard.Authorize(p, PermRead, rec.Application, rec.Environment) == nil {
			writeError(w, r, s.log, err) // it may read the deploy: naming where it is tells nothing new
			return nil, p, false
		}
		// A caller who may not read the deploy learns that it is not
		// theirs, not where it belongs (its application/environment).
		writeError(w, r, s.log, manent.Errorf(manent.EForbidden, "%s may not read deploy %s", p.Subject, rec.ID))
		return nil, p, false
	}
	return rec, p, true
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.deployment(w, r, PermRead)
	if !ok {
		return
	}
	s.explainWait(r.Context(), rec) // activity.go: the queue position of an ENQUEUED deploy
	// The status answer says it too: manent status, logs -f and the web
	// page showed an empty or partial log with no word of retention.
	var err error
	if rec.LogsRemovedFrom, err = s.st.LogsRemovedFrom(r.Context(), rec.ID); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, rec.Deployment)
}

func (s *Server) handleSteps(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.deployment(w, r, PermRead)
	if !ok {
		return
	}
	if rec.State == manent.StatePending && slices.ContainsFunc(rec.Steps, func(st manent.Step) bool { return st.State == manent.StepRunning }) {
		if from, ok := s.requeuedFrom(r.Context(), rec.ID); ok {
			interruptedSteps(rec.Steps, from) // activity.go
		}
	}
	writeJSON(w, http.StatusOK, api.StepsResult{Steps: rec.Steps})
}

func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request) {
	// ?follow=1 answered a page and ?folow=true a page too, as if the log
	// had ended: the switch takes true or false, and each mode only what
	// it reads.
	follow, bad := boolParam(r, "follow")
	if bad == nil {
		known := []string{"follow", "after", "limit"}
		if follow {
			known = []string{"follow", "last_event_id"}
		}
		bad = unknownParameter(r, known)
	}
	if bad != nil {
		writeBadQuery(w, bad)
		return
	}
	if follow { // events.go: the log as Server-Sent Events
		s.followLogs(w, r)
		return
	}
	rec, ok := s.deployment(w, r, PermRead)
	if !ok {
		return
	}
	var after int64
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, r, s.log, manent.Errorf(manent.EInvalid, "after must be the number of a log line (0 or more), got %q", v))
			return
		}
		after = n
	}
	limit, err := limitParam(r, api.MaxLogPage, api.MaxLogPage)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	// Read in chunks, so that a page of long lines stops at
	// MaxLogPageBytes without reading its limit first; one line more than
	// the page says whether the log goes on. A line counts for what its
	// text weighs in JSON: 16 KiB of control characters is about 100 kB.
	res := api.LogsResult{Lines: []manent.LogLine{}, State: rec.State}
	if res.LogsRemovedFrom, err = s.st.LogsRemovedFrom(r.Context(), rec.ID); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	size := 0
	for {
		chunk, full, err := s.st.LogsUpTo(r.Context(), rec.ID, after, min(logChunk, limit+1-len(res.Lines)), logChunkBytes)
		if err != nil {
			writeError(w, r, s.log, err)
			return
		}
		for _, l := range chunk {
			n := jsonTextLen(l.Text)
			if len(res.Lines) == limit || (len(res.Lines) > 0 && size+n > api.MaxLogPageBytes) {
				res.NextAfter = res.Lines[len(res.Lines)-1].Seq
				writeJSON(w, http.StatusOK, res)
				return
			}
			res.Lines = append(res.Lines, l)
			size += n
			after = l.Seq
		}
		if !full {
			writeJSON(w, http.StatusOK, res)
			return
		}
	}
}

// logChunk and logChunkBytes bound what GET …/logs reads from the
// database at once: lines, and their stored JSON.
const (
	logChunk      = 500
	logChunkBytes = 1 << 20
)

// jsonTextLen is how long s is as a JSON string, quotes aside, as
// encoding/json writes it (HTML-escaped, as writeJSON does): a control
// character, <, > and & are six bytes (\u0000), a byte that is not UTF-8
// and U+2028/U+2029 six too (\ufffd, \u2028); \t, \n, \r, \b, \f, " and \ two.
func jsonTextLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"', c == '\\', c == '\t', c == '\n', c == '\r', c == '\b', c == '\f':
				n += 2
			case c < 0x20, c == '<', c == '>', c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	rec, p, ok := s.deploymentAs(w, r, PermCancel)
	if !ok || !s.limitRefusals(w, r, p, "deployment.cancel", rec.ID) {
		return
	}
	// A cancel defines no body: none, or {} from a client that always
	// sends JSON. Anything else — a reason, a force, a typo — is refused
	// before anything is done, not read as a cancel; one past MaxBody is
	// the 413 of every route.
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if len(body) > 0 {
		if err := jsonUnmarshalStrict(body, &struct{}{}); err != nil {
			writeError(w, r, s.log, manent.Errorf(manent.EInvalid, "body: %v (a cancel takes no body, or {})", err))
			return
		}
	}
	after, err := s.eng.CancelBy(r.Context(), rec.ID, p.Subject)
	if err != nil {
		s.auditRefused(r, p, "deployment.cancel", rec.ID, err)
		writeError(w, r, s.log, err)
		return
	}
	if rec.CancelRequested {
		// A repeat: the deploy was already to stop at its next step. It is
		// an entry, and counts as a refusal would (limits.refusals_per_minute):
		// a running step may last long, and each repeat was a row.
		s.refusals.Refused(p.Subject)
	}
	s.audit(r.Context(), r, p, "deployment.cancel", rec.ID, "accepted", string(after.State))
	// A running deploy goes on to the end of its step: the answer says
	// what it waits for, as status does.
	s.explainWait(r.Context(), after)
	writeJSON(w, http.StatusAccepted, after.Deployment)
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	p, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	f := store.Filter{Application: q.Get("application"), Environment: q.Get("environment"), Cursor: q.Get("cursor")}
	if err := invalidNames("filter", f.Application, f.Environment, true); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var err error
	if f.Limit, err = limitParam(r, api.MaxPage, 0); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if v := q.Get("state"); v != "" {
		for _, part := range strings.Split(v, ",") {
			st := manent.State(strings.ToUpper(strings.TrimSpace(part)))
			if !st.Valid() {
				writeError(w, r, s.log, manent.Errorf(manent.EInvalid, "unknown state %q (one of %v)", manent.ClipText(part, maxEchoed), manent.States))
				return
			}
			f.States = append(f.States, st)
		}
	}
	// Reading requires deployment.read on what is asked for (readFilter);
	// what is listed is only what the caller may read.
	if err := s.readFilter(p, f.Application, f.Environment); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	recs, next, err := s.st.List(r.Context(), f)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := api.ListResult{Items: []manent.Deployment{}, NextCursor: next}
	var ids []string
	for _, rec := range recs {
		if s.cfg.Guard.Authorize(p, PermRead, rec.Application, rec.Environment) == nil {
			ids = append(ids, rec.ID)
		}
	}
	steps, err := s.st.StepsOf(r.Context(), ids) // one query for the page
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	for _, rec := range recs {
		if st, ok := steps[rec.ID]; ok {
			rec.Steps = st
			out.Items = append(out.Items, rec.Deployment)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleInventory(w http.ResponseWriter, r *http.Request) {
	p, scope, ok := s.authenticateScope(w, r)
	if !ok {
		return
	}
	inv, err := s.st.Inventory(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := api.InventoryResult{Items: []manent.InventoryEntry{}}
	for _, e := range inv {
		if !scope.has(e.Application, e.Environment) {
			continue
		}
		if s.cfg.Guard.Authorize(p, PermRead, e.Application, e.Environment) == nil {
			out.Items = append(out.Items, e)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{Status: "ok", Time: time.Now().UTC()})
}

// Stopping makes /readyz answer 503 "not ready: shutting down" from now
// on, while every other route is served as before: a server told to stop
// calls it, then goes on serving for shutdown_delay, so that load
// balancers stop sending it requests before it refuses them.
func (s *Server) Stopping() { s.stopping.Store(true) }

// EndStreams ends the open event streams, and those opened from now on,
// with a last comment (": stream ended: the server is shutting down…"):
// clients reconnect with their last event id, to another worker or to
// this one restarted. The HTTP server's shutdown calls it
// (http.Server.RegisterOnShutdown): it waits for the requests in flight,
// and a stream is one until its deploy ends.
func (s *Server) EndStreams() {
	if s.hub != nil {
		s.hub.end()
	}
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if s.stopping.Load() {
		writeError(w, r, s.log, manent.Errorf(manent.EUnavailable, "not ready: shutting down"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.st.Probe(ctx); err != nil {
		reason, retry := "the database cannot be written", 5*time.Second
		if f := store.AsFault(err); f != nil {
			reason, retry = f.Reason, f.RetryAfter
		}
		s.log.Warn("not ready", "error", err)
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
		writeError(w, r, s.log, manent.Errorf(manent.EUnavailable, "not ready: %s", reason))
		return
	}
	writeJSON(w, http.StatusOK, api.Health{Status: "ready", Time: time.Now().UTC()})
}

// readBody reads a request body of at most MaxBody bytes (413 beyond).
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil {
		// A request made in the process (the web UI's buttons call the
		// API's handlers) may have none.
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, manent.Errorf(manent.ETooLarge, "request body is larger than %d bytes", MaxBody)
	}
	if err != nil {
		return nil, bodyError("request body", err)
	}
	return body, nil
}

// bodyError is the problem of a body that could not be read: 408 when it
// did not arrive within the server's read timeout, else 422 — without the
// connection's addresses, which the read error names.
func bodyError(what string, err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return manent.Errorf(manent.ETooSlow, "the %s did not arrive in time: send it faster, or a smaller one", what)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return manent.Errorf(manent.EInvalid, "the %s ended before its announced length", what)
	}
	return manent.Errorf(manent.EInvalid, "the %s could not be read (the connection failed while sending it)", what)
}
