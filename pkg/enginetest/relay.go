package enginetest

import (
	"bytes"
	"context"
	"io"
	"net/http"
)

// Relay is an HTTP handler that sits before a real server: it relays each
// request to Target (the server's base URL) and the server's answer back,
// both read whole, so that a test can lose either on the way — a load
// balancer that lost its backend, an answer lost after the server
// committed. The hooks decide; without them it is a plain relay.
type Relay struct {
	Target string
	// Detached relays each request without the client's context: the
	// server finishes it even when the client has gone meanwhile.
	Detached bool
	// Before, when set, sees each request (its body read) before it is
	// relayed; true means it answered w itself, or dropped the connection
	// (panic(http.ErrAbortHandler)), and the request goes no further.
	Before func(w http.ResponseWriter, r *http.Request) (answered bool)
	// After, when set, sees the server's answer (its body read: the server
	// has done what the request asked) before it is passed on; true means
	// it answered w instead, or dropped the connection.
	After func(w http.ResponseWriter, r *http.Request, resp *http.Response) (answered bool)
}

func (p Relay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if p.Before != nil && p.Before(w, r) {
		return
	}
	ctx := r.Context()
	if p.Detached {
		ctx = context.Background()
	}
	req, _ := http.NewRequestWithContext(ctx, r.Method, p.Target+r.URL.RequestURI(), bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if p.After != nil && p.After(w, r, resp) {
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(data)
}
