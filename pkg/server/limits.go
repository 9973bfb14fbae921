package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

type ctxKey int

const requestIDKey ctxKey = iota

// withRequestID gives every request an id (the caller's X-Request-Id when it
// is sane), echoed in the response and written to the log and the audit log.
func withRequestID(r *http.Request, w http.ResponseWriter) *http.Request {
	id := r.Header.Get("X-Request-Id")
	if !saneRequestID(id) {
		var b [12]byte
		_, _ = rand.Read(b[:])
		id = "req_" + hex.EncodeToString(b[:])
	}
	w.Header().Set("X-Request-Id", id)
	return r.WithContext(context.WithValue(r.Context(), requestIDKey, id))
}

// maxRequestID bounds a caller's X-Request-Id.
const maxRequestID = 128

// saneRequestID says whether a caller's X-Request-Id may be kept: 1 to
// maxRequestID visible ASCII characters. HTTP lets a header value carry
// tabs and any byte above 0x7f, and the id goes into the audit log, which
// `manent audit` prints in columns to a terminal and PostgreSQL stores only
// as UTF-8 (a byte that is not made the audited action fail).
func saneRequestID(id string) bool {
	if len(id) == 0 || len(id) > maxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

func requestID(r *http.Request) string {
	if r == nil {
		return ""
	}
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
}

// limitSubmission answers 429 with Retry-After when identity submits, dry-runs
// or rolls back too fast.
func (s *Server) limitSubmission(w http.ResponseWriter, r *http.Request, p manent.Identity) bool {
	ok, wait := s.limiter.Allow(p.Subject)
	if ok {
		return true
	}
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, r, s.log, manent.Errorf(manent.ETooManyRequests,
		"%s sent more than %.0f submissions, dry runs and rollbacks in a minute (limits.submissions_per_minute); retry in %ds", p.Subject, s.limiter.PerMinute(), secs))
	return false
}

// streamLimiter bounds the event streams open at once: per identity, and in
// all. A stream holds a connection, a goroutine and its buffers (about
// 55 KB) for as long as its deploy runs — days for one waiting for an
// approval — so without a bound the least privileged token could open
// streams until the server runs out of memory or file descriptors.
type streamLimiter struct {
	mu          sync.Mutex
	perIdentity int
	total       int
	open        map[string]int
	all         int
}

func newStreamLimiter(perIdentity, total int) *streamLimiter {
	return &streamLimiter{perIdentity: perIdentity, total: total, open: map[string]int{}}
}

// acquire takes a stream for identity; the error says which bound it hit.
func (l *streamLimiter) acquire(identity string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.open[identity] >= l.perIdentity:
		return manent.Errorf(manent.ETooManyRequests,
			"%s has %d event streams open, the most one identity may (limits.streams_per_identity); close one, or retry in %ds",
			identity, l.open[identity], streamRetrySecs)
	case l.all >= l.total:
		return manent.Errorf(manent.ETooManyRequests,
			"the server has %d event streams open, the most it serves (limits.streams); retry in %ds", l.all, streamRetrySecs)
	}
	l.open[identity]++
	l.all++
	return nil
}

// release gives back a stream of identity.
func (l *streamLimiter) release(identity string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[identity]--; l.open[identity] <= 0 {
		delete(l.open, identity)
	}
	l.all--
}

// streamRetrySecs is the Retry-After of a refused stream.
const streamRetrySecs = 5

// limitStream takes a stream for p, or answers 429 with Retry-After. The
// caller releases it (s.streams.release) when the stream ends.
func (s *Server) limitStream(w http.ResponseWriter, r *http.Request, p manent.Identity) bool {
	if err := s.streams.acquire(p.Subject); err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(streamRetrySecs))
		writeError(w, r, s.log, err)
		return false
	}
	return true
}

// DefaultRefusalsPerMinute is limits.refusals_per_minute's default.
const DefaultRefusalsPerMinute = 60

// limitRefusals answers 429 with Retry-After when p was refused more than
// limits.refusals_per_minute times in a minute on the routes that audit
// their refusals; action and target name the request, as its audit entry
// would. It records the beginning of a stretch of 429s and, on the first
// request it lets through after one, its end and how many answers it held.
func (s *Server) limitRefusals(w http.ResponseWriter, r *http.Request, p manent.Identity, action, target string) bool {
	ok, wait, begins, ended := s.refusals.Admit(p.Subject)
	if ended != nil {
		s.audit(r.Context(), r, p, "limits.refusals", p.Subject, "refused", fmt.Sprintf(
			"%d requests answered 429 without acting from %s to %s (limits.refusals_per_minute)",
			ended.Answered, ended.Since.UTC().Format(time.RFC3339), ended.Until.UTC().Format(time.RFC3339)))
	}
	if ok {
		return true
	}
	secs := int(math.Ceil(wait.Seconds()))
	err := manent.Errorf(manent.ETooManyRequests,
		"%s was refused more than %.0f times in a minute (limits.refusals_per_minute): its approvals, rejections, cancels and agent reports are answered 429 without acting; retry in %ds",
		p.Subject, s.refusals.PerMinute(), secs)
	if begins {
		s.audit(r.Context(), r, p, action, target, "refused", refusal(err)+"; the next 429s are recorded together, when a request of "+p.Subject+" is let through again")
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, r, s.log, err)
	return false
}

// auditRefused records a refusal of a route limitRefusals bounds, and
// takes it from the identity's budget.
func (s *Server) auditRefused(r *http.Request, p manent.Identity, action, target string, err error) {
	s.refusals.Refused(p.Subject)
	s.audit(r.Context(), r, p, action, target, "refused", refusal(err))
}

// DefaultBearerFailuresPerMinute is limits.bearer_failures_per_minute's
// default.
const DefaultBearerFailuresPerMinute = 60

// clientKey is the budget r's client counts against: its address
// (trusted_proxies), an IPv6 one by its /64.
func (s *Server) clientKey(r *http.Request) string { return s.cfg.Proxies.ClientKey(r) }

// limitBearerFailures answers 429 with Retry-After, without checking the
// credential, a request to the API that carries one from a client address
// whose credentials were refused more than limits.bearer_failures_per_minute
// times in a minute (authenticateHeader takes each refusal from it): a
// right token too, or the answer would tell which guess hit. Other
// addresses are not touched, and a request without a credential takes
// nothing (it guesses nothing). The log says when an address's stretch of
// 429s begins and, with how many it held, when it ends — the address,
// never a token.
func (s *Server) limitBearerFailures(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Authorization") == "" || (r.URL.Path != "/api" && !strings.HasPrefix(r.URL.Path, "/api/")) {
		return true
	}
	key := s.clientKey(r)
	ok, wait, begins, ended := s.bearerFailures.Admit(key)
	if ended != nil {
		s.log.Info("refused credentials of an address are no longer limited", "address", key, "answered", ended.Answered,
			"since", ended.Since.UTC().Format(time.RFC3339))
	}
	if ok {
		return true
	}
	secs := int(math.Ceil(wait.Seconds()))
	if begins {
		s.log.Warn("refused credentials of an address are limited", "address", key, "retry_after", secs,
			"limit", "limits.bearer_failures_per_minute", "per_minute", s.bearerFailures.PerMinute())
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, r, s.log, manent.Errorf(manent.ETooManyRequests,
		"more than %.0f refused credentials in a minute from %s (limits.bearer_failures_per_minute): its requests are answered 429 without checking their credential; retry in %ds",
		s.bearerFailures.PerMinute(), key, secs))
	return false
}
