package web

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/manent-io/manent/pkg/budget"
	"github.com/manent-io/manent/pkg/store"
)

// DefaultSignInsPerMinute is limits.sign_ins_per_minute's default: the
// refused sign-ins one client address may make in a minute.
const DefaultSignInsPerMinute = 10

// newSignInLimiter returns the budget of refused sign-ins of each client
// address: each refused sign-in takes one of its address's perMinute
// tokens (0 or less: DefaultSignInsPerMinute), refilled at perMinute a
// minute. When they are spent the address is limited: its sign-ins are
// answered 429 without the token being checked — a right token too, or
// the answer would tell which guess hit — until its budget is whole again
// (a minute at most). As for the API's refusals
// (limits.refusals_per_minute) a stretch of 429s is audited twice: when it
// begins and, with how many answers it held, when it ends (the address's
// next sign-in let through).
//
// The address is the connection's (RemoteAddr), an IPv6 one by its /64: a
// client holds a whole prefix. X-Forwarded-For is read only from a peer in
// trusted_proxies (budget.Proxies) — any client can write it — so behind a
// proxy not named there every client shares the proxy's budget.
func newSignInLimiter(perMinute int, now func() time.Time) *budget.Limiter {
	if perMinute <= 0 {
		perMinute = DefaultSignInsPerMinute
	}
	return budget.New(perMinute, now)
}

// clientKey is the budget r's sign-ins count against: its client's
// address (trusted_proxies), an IPv6 one by its /64.
func (h *Handler) clientKey(r *http.Request) string { return h.cfg.Proxies.ClientKey(r) }

// limitSignIn lets r's sign-in be checked, or answers it 429 with
// Retry-After (the page says why and when) and returns false. It audits
// the beginning of a stretch of 429s and, on the first sign-in it lets
// through after one, its end.
func (h *Handler) limitSignIn(w http.ResponseWriter, r *http.Request, next string) bool {
	key := h.clientKey(r)
	ok, wait, begins, ended := h.signIns.Admit(key)
	if ended != nil {
		h.auditLimit(r, w, "limits.sign-ins", key, fmt.Sprintf(
			"%d sign-ins answered 429 without checking their token from %s to %s (limits.sign_ins_per_minute)",
			ended.Answered, ended.Since.UTC().Format(time.RFC3339), ended.Until.UTC().Format(time.RFC3339)))
	}
	if ok {
		return true
	}
	secs := int(math.Ceil(wait.Seconds()))
	if begins {
		h.log.Warn("web: sign-ins of an address are limited", "address", key, "retry_after", secs)
		h.auditLimit(r, w, "web.sign-in", key, fmt.Sprintf(
			"more than %.0f refused sign-ins in a minute (limits.sign_ins_per_minute): its sign-ins are answered 429 without checking their token; the next 429s are recorded together, when a sign-in of this address is let through again",
			h.signIns.PerMinute()))
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	msg := fmt.Sprintf("Too many refused sign-ins from your address: at most %.0f a minute (limits.sign_ins_per_minute). Sign-ins are not checked until then: try again in %ds.",
		h.signIns.PerMinute(), secs)
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
