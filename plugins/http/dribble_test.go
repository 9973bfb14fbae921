package httpplugin_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/egress"
	"github.com/manent-io/manent/pkg/urlpolicy"
	httpplugin "github.com/manent-io/manent/plugins/http"
)

// A platform that answers its status line at once, then its body a byte
// at a time and never ends it: the call still ends at with.timeout and
// says so, not "context deadline exceeded".
func TestDribblingAnswerEndsAtTheTimeout(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				_, _ = w.Write([]byte(" "))
				w.(http.Flusher).Flush()
			}
		}
	}))
	defer slow.Close()
	client := egress.New(egress.Policy{Outbound: urlpolicy.Outbound{Use: "http plugin call", Key: "plugins.http_allow", Allow: []string{"http://127.0.0.1:*/**"}}})
	var log bytes.Buffer
	pc := pctx(withBase(slow.URL, map[string]any{"timeout": "300ms"}))
	pc.Log = &log
	start := time.Now()
	_, err := httpplugin.New(client).Deploy(context.Background(), pc)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %s", d)
	}
	if err == nil || !strings.Contains(err.Error(), "POST "+slow.URL+"/deploys") || !strings.Contains(err.Error(), "no whole answer within 300ms") {
		t.Fatalf("Deploy: %v, want it to say the answer did not end within with.timeout", err)
	}
}
