package servertest

import (
	"net/http"
	"sync"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
)

// SubmitFaults sits before a real server (Target, its base URL) and fails
// the POSTs to Path (the submit route when empty): the first Busy get a 503
// with Retry-After: 0 from it; the next Drops are relayed, done by the
// server, and then their connection is dropped before the client sees the
// answer. Every other request is relayed.
type SubmitFaults struct {
	Target      string
	Busy, Drops int
	Path        string

	mu   sync.Mutex
	seen int
	keys []string
}

func (p *SubmitFaults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := p.Path
	if path == "" {
		path = "/api/v1/deployments"
	}
	submit := r.Method == http.MethodPost && r.URL.Path == path
	n := 0
	enginetest.Relay{
		Target: p.Target,
		Before: func(w http.ResponseWriter, r *http.Request) bool {
			if !submit {
				return false
			}
			p.mu.Lock()
			p.seen++
			n = p.seen
			p.keys = append(p.keys, r.Header.Get(api.IdempotencyKeyHeader))
			p.mu.Unlock()
			if n <= p.Busy {
				w.Header().Set("Retry-After", "0")
				w.Header().Set("Content-Type", api.ProblemContentType)
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"title":"Service Unavailable","status":503,"detail":"database is busy; retry in 0s"}`))
				return true
			}
			return false
		},
		After: func(http.ResponseWriter, *http.Request, *http.Response) bool {
			if submit && n <= p.Busy+p.Drops {
				panic(http.ErrAbortHandler) // committed, but the answer is lost
			}
			return false
		},
	}.ServeHTTP(w, r)
}

// Keys returns the Idempotency-Key of each failing route's request so far.
func (p *SubmitFaults) Keys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.keys...)
}
