package web

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/manent-io/manent/pkg/store"
)

// DefaultSignInsPerMinute is limits.sign_ins_per_minute's default: the
// refused sign-ins one client address may make in a minute.
const DefaultSignInsPerMinute = 10

// maxSignInBuckets bounds the addresses the limiter remembers; past it,
// those whose budget is whole and that are not limited are forgotten
// (forgetting a whole budget changes nothing).
const maxSignInBuckets = 100_000

// signInLimiter bounds the guesses the sign-in form lets one client make:
// each refused sign-in takes one of its address's perMin tokens, refilled
// at perMin a minute. When they are spent the address is limited: its
// sign-ins are answered 429 without the token being checked — a right
// token too, or the answer would tell which guess hit — until its budget
// is whole again (a minute at most). As for the API's refusals
// (limits.refusals_per_minute) a stretch of 429s is audited twice: when it
// begins and, with how many answers it held, when it ends (the address's
// next sign-in let through).
//
// The address is the connection's (RemoteAddr), an IPv6 one by its /64: a
// client holds a whole prefix. X-Forwarded-For is not read — any client
// can write it — so behind a proxy every client shares the proxy's budget.
type signInLimiter struct {
	mu      sync.Mutex
	perMin  float64
	now     func() time.Time
	buckets map[string]*signInBucket
}

type signInBucket struct {
	tokens float64
	last   time.Time
	// limited is when the address's stretch of 429s began (zero: not
	// limited); answered counts its 429s.
	limited  time.Time
	answered int
}

func newSignInLimiter(perMinute int, now func() time.Time) *signInLimiter {
	if perMinute <= 0 {
		perMinute = DefaultSignInsPerMinute
	}
	return &signInLimiter{perMin: float64(perMinute), now: now, buckets: map[string]*signInBucket{}}
}

// bucket returns key's bucket refilled to now; a new one is full. l.mu is
// held.
func (l *signInLimiter) bucket(key string, now time.Time) *signInBucket {
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxSignInBuckets {
			for k, v := range l.buckets {
				if v.limited.IsZero() && v.tokens+now.Sub(v.last).Minutes()*l.perMin >= l.perMin {
					delete(l.buckets, k)
				}
			}
		}
		b = &signInBucket{tokens: l.perMin, last: now}
		l.buckets[key] = b
	}
	b.tokens = math.Min(l.perMin, b.tokens+now.Sub(b.last).Minutes()*l.perMin)
	b.last = now
	return b
}

// signInStretch is a stretch of 429s of one address.
type signInStretch struct {
	since, until time.Time
	answered     int
}

// admit lets key's sign-in be checked, or answers how long until it may
// retry and whether this 429 begins a stretch. A sign-in let through may
// end a stretch: ended is then that stretch, to be recorded.
func (l *signInLimiter) admit(key string) (ok bool, wait time.Duration, begins bool, ended *signInStretch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.bucket(key, now)
	if b.limited.IsZero() {
		return true, 0, false, nil
	}
	if b.tokens >= l.perMin {
		if b.answered > 0 {
			ended = &signInStretch{since: b.limited, until: now, answered: b.answered}
		}
		b.limited, b.answered = time.Time{}, 0
		return true, 0, false, ended
	}
	b.answered++
	wait = time.Duration((l.perMin - b.tokens) / l.perMin * float64(time.Minute))
	return false, wait, b.answered == 1, nil
}

// refused takes a token for a refused sign-in of key; the one that
// empties its budget limits it.
func (l *signInLimiter) refused(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.bucket(key, now)
	b.tokens = math.Max(0, b.tokens-1)
	if b.tokens < 1 && b.limited.IsZero() {
		b.limited = now
	}
}

// clientKey is the budget r's sign-ins count against: the connection's
// address, an IPv6 one as its /64.
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// limitSignIn lets r's sign-in be checked, or answers it 429 with
// Retry-After (the page says why and when) and returns false. It audits
// the beginning of a stretch of 429s and, on the first sign-in it lets
// through after one, its end.
func (h *Handler) limitSignIn(w http.ResponseWriter, r *http.Request, next string) bool {
	key := clientKey(r)
	ok, wait, begins, ended := h.signIns.admit(key)
	if ended != nil {
		h.auditLimit(r, w, "limits.sign-ins", key, fmt.Sprintf(
			"%d sign-ins answered 429 without checking their token from %s to %s (limits.sign_ins_per_minute)",
			ended.answered, ended.since.UTC().Format(time.RFC3339), ended.until.UTC().Format(time.RFC3339)))
	}
	if ok {
		return true
	}
	secs := int(math.Ceil(wait.Seconds()))
	if begins {
		h.log.Warn("web: sign-ins of an address are limited", "address", key, "retry_after", secs)
		h.auditLimit(r, w, "web.sign-in", key, fmt.Sprintf(
			"more than %.0f refused sign-ins in a minute (limits.sign_ins_per_minute): its sign-ins are answered 429 without checking their token; the next 429s are recorded together, when a sign-in of this address is let through again",
			h.signIns.perMin))
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	msg := fmt.Sprintf("Too many refused sign-ins from your address: at most %.0f a minute (limits.sign_ins_per_minute). Sign-ins are not checked until then: try again in %ds.",
		h.signIns.perMin, secs)
	p := &pageData{Title: "Sign in", CSRF: h.loginCSRF(w, r), Data: loginView{Next: next, OIDC: h.oidcEnabled(), Error: msg}}
	h.render(w, r, "login", http.StatusTooManyRequests, p)
	return false
}

// auditLimit records, as refused, an entry of the sign-in limit for the
// address key (an anonymous client: no identity signed in).
func (h *Handler) auditLimit(r *http.Request, w http.ResponseWriter, action, key, detail string) {
	err := h.auditLog.AppendAudit(context.WithoutCancel(r.Context()), store.AuditEntry{
		Identity: "anonymous", Action: action, Target: "address:" + key, RequestID: w.Header().Get("X-Request-Id"),
		Outcome: "refused", Detail: detail,
	})
	if err != nil {
		h.log.Error("web: audit of the sign-in limit", "address", key, "error", err)
	}
}
