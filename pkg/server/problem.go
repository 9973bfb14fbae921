package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// writeJSON writes v with status, in pieces of answerPiece bytes, each
// given the streams' write timeout: a client that does not read for that
// long is disconnected, and the answer (a page of log is megabytes) is
// not held for it for good.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		b.Reset()
		status = http.StatusInternalServerError
		fmt.Fprintf(&b, "{\"title\": %q, \"status\": 500}\n", http.StatusText(status))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	timeout := currentStreamTiming().WriteTimeout
	deadlines := false
	for p := b.Bytes(); len(p) > 0; {
		n := min(len(p), answerPiece)
		if rc.SetWriteDeadline(time.Now().Add(timeout)) == nil {
			deadlines = true
		}
		if _, err := w.Write(p[:n]); err != nil {
			return // the connection is failed: nothing to reset
		}
		p = p[n:]
	}
	if deadlines {
		// The next answer on this connection gets its own.
		_ = rc.SetWriteDeadline(time.Time{})
	}
}

// answerPiece is how much of an answer one write (one deadline) carries.
const answerPiece = 64 << 10

// writeError maps err to a problem+json answer; only internal errors are
// logged, and their text never reaches the client.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	if errors.Is(err, store.ErrNotFound) {
		err = manent.Errorf(manent.ENotFound, "not found")
	}
	if f := storageFault(err); f != nil {
		// Overload and storage faults are the server's, temporary, never a
		// 500: 503 with when to come back.
		secs := int(math.Ceil(f.RetryAfter.Seconds()))
		log.Warn("storage fault", "method", r.Method, "path", r.URL.Path, "error", err)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		err = manent.Errorf(manent.EUnavailable, "%s; retry in %ds", f.Reason, secs)
	}
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil && manent.ErrorCode(err) == manent.EInternal {
		// The request was cancelled: the client went away (it reads
		// nothing) or the server is stopping: come back to the next one.
		w.Header().Set("Retry-After", "1")
		err = manent.Errorf(manent.EUnavailable, "the request was cancelled (the server may be stopping); retry in 1s")
	}
	code := manent.ErrorCode(err)
	status := api.StatusForCode(code)
	p := api.Problem{Title: http.StatusText(status), Status: status}
	var me *manent.Error
	if errors.As(err, &me) {
		p.Detail = me.Error()
		p.Errors = me.Fields
		if me.RetryAfter > 0 && w.Header().Get("Retry-After") == "" {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(me.RetryAfter.Seconds()))))
		}
	}
	if code == manent.EInternal {
		log.Error("internal error", "method", r.Method, "path", r.URL.Path, "error", err)
		p.Detail = "internal error; the server log has the details"
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="manent"`)
	}
	w.Header().Set("Content-Type", api.ProblemContentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

// storageFault returns the storage fault (busy database, full disk,
// database down) behind an error no domain code classified, or nil: what
// the caller is told as a 503, and audited with its reason.
func storageFault(err error) *store.Fault {
	if f := store.AsFault(err); f != nil && manent.ErrorCode(err) == manent.EInternal {
		return f
	}
	return nil
}

// writeMethodNotAllowed answers a known path asked with a method it does
// not serve: 405, the Allow header and a problem+json that names them.
func writeMethodNotAllowed(w http.ResponseWriter, r *http.Request, allow []string) {
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeStatus(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: this path answers %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
}

// writeStatus answers a problem+json with a status that no domain error
// code maps to (405, 415).
func writeStatus(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", api.ProblemContentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.Problem{Title: http.StatusText(status), Status: status, Detail: detail})
}
