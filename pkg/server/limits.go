package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	now := l.now()
	b, ok := l.buckets[identity]
	if !ok {
		if len(l.buckets) > 100_000 { // bounded memory: forget idle buckets
			for k, v := range l.buckets {
				if now.Sub(v.last) > time.Minute {
					delete(l.buckets, k)
				}
			}
		}
		b = &bucket{tokens: l.perMin, last: now}
		l.buckets[identity] = b
	}
	b.tokens = math.Min(l.perMin, b.tokens+now.Sub(b.last).Minutes()*l.perMin)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.perMin * float64(time.Minute))
	return false, wait
}

// limitSubmission answers 429 with Retry-After when identity submits too fast.
func (s *Server) limitSubmission(w http.ResponseWriter, r *http.Request, p manent.Identity) bool {
	ok, wait := s.limiter.allow(p.Subject)
	if ok {
		return true
	}
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, r, s.log, manent.Errorf(manent.ETooManyRequests,
		"%s submitted more than %.0f deploys in a minute; retry in %ds", p.Subject, s.limiter.perMin, secs))
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
