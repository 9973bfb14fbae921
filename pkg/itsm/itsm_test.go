package itsm_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/itsm"
	"github.com/manent-io/manent/pkg/plugin"
)

// QA: an open answered 201 {"state":"pending"} was taken for a change with
// an empty id, and polling then asked GET /changes/. It is a protocol
// error: permanent, saying what is missing.
func TestOpenWithoutAnID(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"state":"pending"}`))
	}))
	defer srv.Close()
	h := &itsm.HTTP{URL: srv.URL, Client: srv.Client()}
	c, err := h.Open(context.Background(), itsm.Request{DeployID: "dpl_1"})
	if err == nil {
		t.Fatalf("open answered %+v without an error", c)
	}
	if !plugin.IsPermanent(err) || !strings.Contains(err.Error(), "no change id") || !strings.Contains(err.Error(), `{"state":"pending"}`) {
		t.Errorf("error %q (permanent %v), want a permanent protocol error quoting the answer", err, plugin.IsPermanent(err))
	}
}

// QA: a hostile or broken ITSM. Each answer gives a precise error (what the
// ITSM answered, what manent expected), is permanent only when trying again
// cannot help, reads at most 1 MiB, follows no redirect, and never quotes
// the ITSM token, even when the ITSM echoes it.
func TestHostileAnswers(t *testing.T) {
	const token = "s3cr3t-itsm-token"
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		want      []string
		permanent bool
	}{
		{"an HTML error page echoing the request", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html><body>upstream failed; you sent " + r.Header.Get("Authorization") + "</body></html>"))
		}, []string{"HTTP 502", "upstream failed", "[redacted]"}, false},
		{"HTML with 200", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html>login page</html>"))
		}, []string{"not the JSON", "text/html", "<html>login page"}, false},
		{"truncated JSON", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"id": "CHG1", "sta`))
		}, []string{"not the JSON", `{"id": "CHG1", "sta`}, false},
		{"wrong types", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"id": 12, "state": ["pending"]}`))
		}, []string{"not the JSON", "id"}, false},
		{"100 MiB", func(w http.ResponseWriter, r *http.Request) {
			chunk := []byte(`{"id": "` + strings.Repeat("x", 1<<16))
			for range 1600 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, []string{"more than 1 MiB"}, false},
		{"cut mid-body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(`{"id": "CHG1",`))
			http.NewResponseController(w).Flush()
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
		}, []string{"reading the answer", "unexpected EOF"}, false},
		{"a redirect to the metadata service", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		}, []string{"HTTP 302", "redirected to http://169.254.169.254/latest/meta-data/", "follows no redirect", "itsm.url"}, true},
		{"429 with Retry-After", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
		}, []string{"HTTP 429", "Retry-After: 120"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			h := &itsm.HTTP{URL: srv.URL, Token: token} // the egress client
			_, err := h.Get(context.Background(), "CHG1")
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q, want it to contain %q", msg, w)
				}
			}
			if strings.Contains(msg, token) {
				t.Errorf("error %q quotes the ITSM token", msg)
			}
			if len(msg) > 2000 {
				t.Errorf("error of %d bytes", len(msg))
			}
			if plugin.IsPermanent(err) != tt.permanent {
				t.Errorf("permanent %v, want %v: %s", plugin.IsPermanent(err), tt.permanent, msg)
			}
		})
	}
}

// QA: an open answered with a change id holding a control character (or
// a "." or ".." path segment) was accepted: change:open succeeded, then
// every poll and the close were refused before they left (the request URL
// would hold it), so the deploy waited in AWAITING_APPROVAL for
// itsm.give_up_after (24h) for a change it could never ask about, and the
// change was never closed. Like a missing id, it is a protocol error:
// permanent, quoting the id escaped (the answer it quotes is escaped where
// it is shown, as every ITSM answer).
func TestOpenWithAnIDThatCannotBeAskedAbout(t *testing.T) {
	for _, id := range []string{"CHG\x1b[31mRED", "CHG1\r\nFAKE: line", "CHG\x7f", "..", ".", "CHG/../admin", "a/./b"} {
		t.Run(strings.NewReplacer("\x1b", "ESC", "\r", "CR", "\n", "LF", "\x7f", "DEL", "/", "_").Replace(id), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				_ = json.NewEncoder(w).Encode(map[string]string{"id": id, "state": "pending"})
			}))
			defer srv.Close()
			h := &itsm.HTTP{URL: srv.URL, Client: srv.Client()}
			c, err := h.Open(context.Background(), itsm.Request{DeployID: "dpl_1"})
			if err == nil {
				t.Fatalf("open answered %+v without an error", c)
			}
			msg := err.Error()
			if !plugin.IsPermanent(err) || !strings.Contains(msg, "change id") || !strings.Contains(msg, "docs/itsm.md") {
				t.Errorf("error %q (permanent %v), want a permanent protocol error about the change id", msg, plugin.IsPermanent(err))
			}
			if !strings.Contains(msg, strconv.Quote(id)) {
				t.Errorf("error %q does not quote the id escaped, as %s", msg, strconv.Quote(id))
			}
		})
	}
	// An id with a "/" or a space is followed (escaped in the URL).
	for _, id := range []string{"CHG/0001", "CHG 1", "Ä-1"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"id": id, "state": "pending"})
		}))
		h := &itsm.HTTP{URL: srv.URL, Client: srv.Client()}
		if _, err := h.Open(context.Background(), itsm.Request{DeployID: "dpl_1"}); err != nil {
			t.Errorf("open answering id %q: %v", id, err)
		}
		if _, err := h.Get(context.Background(), id); err != nil {
			t.Errorf("get of id %q: %v", id, err)
		}
		srv.Close()
	}
}
