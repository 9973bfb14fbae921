package budget

import (
	"math"
	"sync"
	"time"
)

// maxBuckets bounds the keys a Limiter remembers; past it, those whose
// budget is whole and that are not limited are forgotten first (bounded
// memory: forgetting a whole budget changes nothing).
const maxBuckets = 100_000

// Limiter is a token bucket per key: perMin tokens, refilled at perMin a
// minute. Allow takes one token per call. Admit and Refused are the other
// use: Refused takes a token, and the one that empties the bucket limits
// the key; Admit then answers no until the budget is whole again (a minute
// at most), and says when a stretch of such answers begins and, with how
// many it held, when it ends (the key's next call let through).
//
// A nil Limiter, or one of perMin <= 0, lets everything through.
type Limiter struct {
	mu      sync.Mutex
	perMin  float64
	now     func() time.Time
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
	// limited is when the key's stretch of 429s began (zero: not
	// limited); answered counts its 429s (Admit only).
	limited  time.Time
	answered int
}

// Stretch is a stretch of 429s of one key: from Since to Until, Answered
// answers.
type Stretch struct {
	Since, Until time.Time
	Answered     int
}

// New returns a Limiter of perMinute tokens a minute per key, reading the
// time from now (nil: time.Now).
func New(perMinute int, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{perMin: float64(perMinute), now: now, buckets: map[string]*bucket{}}
}

// PerMinute is the limiter's tokens a minute (0 for a nil Limiter).
func (l *Limiter) PerMinute() float64 {
	if l == nil {
		return 0
	}
	return l.perMin
}

// SetClock makes l read the time from now, and returns the clock it read
// until then (for tests).
func (l *Limiter) SetClock(now func() time.Time) (prev func() time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev, l.now = l.now, now
	return prev
}

func (l *Limiter) off() bool { return l == nil || l.perMin <= 0 }

// bucket returns key's bucket refilled to now; a new one is full. l.mu is
// held.
func (l *Limiter) bucket(key string, now time.Time) *bucket {
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxBuckets {
			for k, v := range l.buckets {
				if v.limited.IsZero() && v.tokens+now.Sub(v.last).Minutes()*l.perMin >= l.perMin {
					delete(l.buckets, k)
				}
			}
		}
		b = &bucket{tokens: l.perMin, last: now}
		l.buckets[key] = b
	}
	b.tokens = math.Min(l.perMin, b.tokens+now.Sub(b.last).Minutes()*l.perMin)
	b.last = now
	return b
}

// Allow takes a token for key, or returns how long until one is free.
func (l *Limiter) Allow(key string) (bool, time.Duration) {
	if l.off() {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(key, l.now())
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.perMin * float64(time.Minute))
	return false, wait
}

// Admit lets key through, or answers how long until it may retry (its
// budget whole again) and whether this answer begins a stretch. A call let
// through may end a stretch: ended is then that stretch, to be recorded.
func (l *Limiter) Admit(key string) (ok bool, wait time.Duration, begins bool, ended *Stretch) {
	if l.off() {
		return true, 0, false, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, known := l.buckets[key]; !known {
		return true, 0, false, nil // a whole budget: no bucket made for it
	}
	now := l.now()
	b := l.bucket(key, now)
	if b.limited.IsZero() {
		return true, 0, false, nil
	}
	if b.tokens >= l.perMin {
		if b.answered > 0 {
			ended = &Stretch{Since: b.limited, Until: now, Answered: b.answered}
		}
		b.limited, b.answered = time.Time{}, 0
		return true, 0, false, ended
	}
	b.answered++
	wait = time.Duration((l.perMin - b.tokens) / l.perMin * float64(time.Minute))
	return false, wait, b.answered == 1, nil
}

// Refused takes a token for a refusal of key; the one that empties its
// budget limits it.
func (l *Limiter) Refused(key string) {
	if l.off() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.bucket(key, now)
	b.tokens = math.Max(0, b.tokens-1)
	if b.tokens < 1 && b.limited.IsZero() {
		b.limited = now
	}
}
