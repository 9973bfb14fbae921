package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

type ctxKey int

const requestIDKey ctxKey = iota

// withRequestID gives every request an id (the caller's X-Request-Id when it
// is sane), echoed in the response and written to the audit log.
func withRequestID(r *http.Request, w http.ResponseWriter) *http.Request {
	id := r.Header.Get("X-Request-Id")
	if len(id) == 0 || len(id) > 128 {
		var b [12]byte
		_, _ = rand.Read(b[:])
		id = "req_" + hex.EncodeToString(b[:])
	}
	w.Header().Set("X-Request-Id", id)
	return r.WithContext(context.WithValue(r.Context(), requestIDKey, id))
}

func requestID(r *http.Request) string {
	if r == nil {
		return ""
	}
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
}

// rateLimiter is a token bucket per identity for submissions.
type rateLimiter struct {
	mu      sync.Mutex
	perMin  float64
	buckets map[string]*bucket
	now     func() time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
	// limited is when the identity's stretch of 429s began (zero: not
	// limited); answered counts its 429s (refusalLimiter only).
	limited  time.Time
	answered int
}

// bucketOf returns identity's bucket of m, perMin tokens a minute, refilled
// to now; a new one is full. Past 100,000 buckets the full ones not in a
// stretch of 429s are forgotten first (bounded memory: forgetting a full
// bucket changes nothing).
func bucketOf(m map[string]*bucket, identity string, now time.Time, perMin float64) *bucket {
	b, ok := m[identity]
	if !ok {
		if len(m) > 100_000 {
			for k, v := range m {
				if v.limited.IsZero() && v.tokens+now.Sub(v.last).Minutes()*perMin >= perMin {
					delete(m, k)
				}
			}
		}
		b = &bucket{tokens: perMin, last: now}
		m[identity] = b
	}
	b.tokens = math.Min(perMin, b.tokens+now.Sub(b.last).Minutes()*perMin)
	b.last = now
	return b
}

func newRateLimiter(perMinute int) *rateLimiter {
	return &rateLimiter{perMin: float64(perMinute), buckets: map[string]*bucket{}, now: time.Now}
}

// allow takes a token for identity, or returns how long until one is free.
func (l *rateLimiter) allow(identity string) (bool, time.Duration) {
	if l == nil || l.perMin <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := bucketOf(l.buckets, identity, l.now(), l.perMin)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.perMin * float64(time.Minute))
	return false, wait
}

// limitSubmission answers 429 with Retry-After when identity submits, dry-runs
// or rolls back too fast.
func (s *Server) limitSubmission(w http.ResponseWriter, r *http.Request, p manent.Identity) bool {
	ok, wait := s.limiter.allow(p.Subject)
	if ok {
		return true
	}
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, r, s.log, manent.Errorf(manent.ETooManyRequests,
		"%s sent more than %.0f submissions, dry runs and rollbacks in a minute (limits.submissions_per_minute); retry in %ds", p.Subject, s.limiter.perMin, secs))
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

// refusalLimiter bounds, per identity, the refusals the audit log records
// of the routes that audit a refusal after authentication and are not
// bounded otherwise (approve, reject, cancel, agent reports): without it
// one token that may only approve added one row to the audit chain per
// request, as fast as it could send them. Each audited refusal takes a
// token of a bucket of perMin, refilled at perMin a minute; when it is
// empty the identity is limited: those routes answer 429 without acting,
// until its bucket is full again (a minute at most). A stretch of 429s
// is recorded twice, not once per answer: when it begins (the first 429)
// and, with how many answers it held, when it ends (the identity's next
// request let through).
type refusalLimiter struct {
	mu      sync.Mutex
	perMin  float64
	buckets map[string]*bucket
	now     func() time.Time
}

func newRefusalLimiter(perMinute int) *refusalLimiter {
	return &refusalLimiter{perMin: float64(perMinute), buckets: map[string]*bucket{}, now: time.Now}
}

// refusalStretch is a stretch of 429s of one identity.
type refusalStretch struct {
	since, until time.Time
	answered     int
}

// admit lets identity's request through, or answers how long until it may
// retry and whether this 429 begins a stretch. A request let through may
// end a stretch: ended is then that stretch, to be recorded.
func (l *refusalLimiter) admit(identity string) (ok bool, wait time.Duration, begins bool, ended *refusalStretch) {
	if l == nil || l.perMin <= 0 {
		return true, 0, false, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := bucketOf(l.buckets, identity, now, l.perMin)
	if b.limited.IsZero() {
		return true, 0, false, nil
	}
	if b.tokens >= l.perMin {
		if b.answered > 0 {
			ended = &refusalStretch{since: b.limited, until: now, answered: b.answered}
		}
		b.limited, b.answered = time.Time{}, 0
		return true, 0, false, ended
	}
	b.answered++
	wait = time.Duration((l.perMin - b.tokens) / l.perMin * float64(time.Minute))
	return false, wait, b.answered == 1, nil
}

// refused takes a token for an audited refusal of identity; the one that
// empties its bucket limits it.
func (l *refusalLimiter) refused(identity string) {
	if l == nil || l.perMin <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := bucketOf(l.buckets, identity, now, l.perMin)
	b.tokens = math.Max(0, b.tokens-1)
	if b.tokens < 1 && b.limited.IsZero() {
		b.limited = now
	}
}

// limitRefusals answers 429 with Retry-After when p was refused more than
// limits.refusals_per_minute times in a minute on the routes that audit
// their refusals; action and target name the request, as its audit entry
// would. It records the beginning of a stretch of 429s and, on the first
// request it lets through after one, its end and how many answers it held.
func (s *Server) limitRefusals(w http.ResponseWriter, r *http.Request, p manent.Identity, action, target string) bool {
	ok, wait, begins, ended := s.refusals.admit(p.Subject)
	if ended != nil {
		s.audit(r.Context(), r, p, "limits.refusals", p.Subject, "refused", fmt.Sprintf(
			"%d requests answered 429 without acting from %s to %s (limits.refusals_per_minute)",
			ended.answered, ended.since.UTC().Format(time.RFC3339), ended.until.UTC().Format(time.RFC3339)))
	}
	if ok {
		return true
	}
	secs := int(math.Ceil(wait.Seconds()))
	err := manent.Errorf(manent.ETooManyRequests,
		"%s was refused more than %.0f times in a minute (limits.refusals_per_minute): its approvals, rejections, cancels and agent reports are answered 429 without acting; retry in %ds",
		p.Subject, s.refusals.perMin, secs)
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
	s.refusals.refused(p.Subject)
	s.audit(r.Context(), r, p, action, target, "refused", refusal(err))
}
