package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/cli"
)

// A stream that goes silent (a half-open connection: no heartbeat, no
// close) is dropped after the idle bound and resumed with Last-Event-ID:
// `logs -f` prints every line once and exits 0.
func TestLogsFollowResumesSilentStream(t *testing.T) {
	var (
		mu      sync.Mutex
		streams []string // Last-Event-ID of each stream request
		served  bool     // the second stream (with done) was served
	)
	event := func(seq int64, typ string, data any) string {
		raw, _ := json.Marshal(data)
		e, _ := json.Marshal(api.Event{DeploymentID: "dpl_1", Seq: seq, Type: typ, Time: time.Now().UTC(), Data: raw})
		return fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", seq, typ, e)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/deployments/dpl_1", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		state := "PENDING"
		if served {
			state = "SUCCESS"
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"dpl_1","state":%q,"steps":[]}`, state)
	})
	mux.HandleFunc("GET /api/v1/deployments/dpl_1/logs", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		streams = append(streams, r.Header.Get("Last-Event-ID"))
		n := len(streams)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if n == 1 {
			fmt.Fprint(w, event(1, api.EventLog, api.EventLogData{Step: "talk", Text: "line 1"}))
			w.(http.Flusher).Flush()
			<-r.Context().Done() // then silence, connection left open
			return
		}
		fmt.Fprint(w, event(2, api.EventLog, api.EventLogData{Step: "talk", Text: "line 2"}))
		mu.Lock()
		served = true
		mu.Unlock()
		fmt.Fprint(w, event(3, api.EventDone, api.EventDoneData{State: "SUCCESS"}))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env := map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": "t"}
	code := cli.Run(ctx, cli.Invocation{
		Args: []string{"logs", "-f", "dpl_1"}, Stdout: &stdout, Stderr: &stderr,
		Getenv: func(k string) string { return env[k] }, PollInterval: 20 * time.Millisecond,
		StreamIdle: 300 * time.Millisecond,
	})
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if n1, n2 := strings.Count(stdout.String(), "[talk] line 1"), strings.Count(stdout.String(), "[talk] line 2"); n1 != 1 || n2 != 1 {
		t.Errorf("printed line 1 %d times and line 2 %d times, want once each:\n%s", n1, n2, stdout.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(streams) != 2 || streams[0] != "" || streams[1] != "1" {
		t.Errorf("Last-Event-ID of the stream requests: %q, want none then 1", streams)
	}
}
