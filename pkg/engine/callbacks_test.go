package engine_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// verify checks a Standard Webhooks signature, written from the spec
// without the sender's code: HMAC-SHA256 over "<id>.<timestamp>.<body>"
// with the base64 secret after "whsec_".
func verify(secret, id, ts string, body []byte, header string) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(header) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}

// A deploy's callbacks arrive signed, from the durable outbox: started, one
// event per step, finished with the outcome; retries keep the webhook-id.
func TestCallbacksSignedFromOutbox(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
		var mu sync.Mutex
		seen := map[string][]string{} // webhook-id → event types received
		var types []string
		failedOnce := map[string]bool{}
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
			if !verify(secret, id, ts, body, r.Header.Get("webhook-signature")) {
				t.Errorf("bad signature on %s", id)
				w.WriteHeader(400)
				return
			}
			var ev struct {
				Type       string `json:"type"`
				Deployment struct {
					State string `json:"state"`
				} `json:"deployment"`
				Step *struct{ Name string } `json:"step"`
			}
			_ = json.Unmarshal(body, &ev)
			mu.Lock()
			defer mu.Unlock()
			// The first delivery of the "finished" event fails: the retry must
			// carry the same webhook-id.
			if ev.Type == "finished" && !failedOnce[id] {
				failedOnce[id] = true
				seen[id] = append(seen[id], "503")
				w.WriteHeader(503)
				return
			}
			name := ev.Type
			if ev.Step != nil {
				name += ":" + ev.Step.Name
			}
			if ev.Type == "finished" {
				name += ":" + ev.Deployment.State
			}
			seen[id] = append(seen[id], name)
			types = append(types, name)
		}))
		defer recv.Close()
		t.Setenv("TEST_CALLBACK_SECRET", secret)
		f := newFixture(t, db, 2, func(c *node.Config) {
			c.Callbacks.Allow = []string{"http://127.0.0.1:*/**"}
			c.Callbacks.SecretEnv = "TEST_CALLBACK_SECRET"
		})
		url, _ := f.artifact("v1", "x")
		id := f.submit(descriptorYAML("cb", "prod", "1", url, "", fmt.Sprintf("callbacks:\n  - url: %s/hook\n", recv.URL)))
		if rec := f.wait(id, 30*time.Second); rec.State != manent.StateSuccess {
			t.Fatalf("state %s (%s)", rec.State, rec.Error)
		}
		enginetest.Eventually(t, 60*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(types) > 0 && strings.HasPrefix(types[len(types)-1], "finished")
		}, "the finished callback (retried after a 503)")
		mu.Lock()
		defer mu.Unlock()
		got := map[string]bool{}
		for _, ty := range types {
			got[ty] = true
		}
		for _, want := range []string{"started", "step:config", "step:artifacts", "step:deploy", "step:activation", "finished:SUCCESS"} {
			if !got[want] {
				t.Errorf("callbacks %v: missing %s", types, want)
			}
		}
		for wid, hist := range seen {
			if len(hist) == 2 && hist[0] != "503" {
				t.Errorf("webhook-id %s delivered twice: %v", wid, hist)
			}
			if hist[0] == "503" && (len(hist) != 2 || !strings.HasPrefix(hist[1], "finished")) {
				t.Errorf("the retry of %s did not reuse its webhook-id: %v", wid, hist)
			}
		}
		rec, err := f.eng.Refresh(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(rec.Deliveries), `"delivered"`) {
			t.Errorf("deliveries in status: %s", rec.Deliveries)
		}
	})
}

// A receiver that orders a deploy's events by their body's timestamp, as
// docs/callbacks.md tells it to (up to 4 are in flight at once, and retries
// come later), sees them in the order they happened: started first, each
// step as it ended — the failed step before the compensations it caused —
// and finished last. The started event was stamped when notify:started ran,
// after the config step had ended, and the failed step's event when the
// deploy concluded, after its rollback.
func TestCallbackTimestampsOrderTheEvents(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
		type got struct {
			Type       string    `json:"type"`
			Timestamp  time.Time `json:"timestamp"`
			Deployment struct {
				ID string `json:"id"`
			} `json:"deployment"`
			Step *struct{ Name string } `json:"step"`
		}
		var mu sync.Mutex
		var events []got
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if !verify(secret, r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), body, r.Header.Get("webhook-signature")) {
				t.Errorf("bad signature on %s", r.Header.Get("webhook-id"))
			}
			var ev got
			if err := json.Unmarshal(body, &ev); err != nil {
				t.Errorf("body %s: %v", body, err)
			}
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}))
		defer recv.Close()
		t.Setenv("TEST_CALLBACK_SECRET", secret)
		f := newFixture(t, db, 2, func(c *node.Config) {
			c.Callbacks.Allow = []string{"http://127.0.0.1:*/**"}
			c.Callbacks.SecretEnv = "TEST_CALLBACK_SECRET"
		})
		url1, _ := f.artifact("v1", "one")
		url2, _ := f.artifact("v2", "two")
		if r := f.wait(f.submit(descriptorYAML("shop", "prod", "1", url1, "", withRollback)), 30*time.Second); r.State != manent.StateSuccess {
			t.Fatalf("v1: %s %s", r.State, r.Error)
		}
		extra := fmt.Sprintf("callbacks:\n  - url: %s/hook\n", recv.URL) +
			"rollback: {enabled: true, on: [deploy, activation, smoke]}\nmax_retries: 0\n" +
			"steps:\n  - {name: smoke, after: activation, plugin: script, with: {command: [sh, -c, 'exit 3']}}\n"
		id := f.submit(descriptorYAML("shop", "prod", "2", url2, "", extra))
		rec := f.wait(id, 30*time.Second)
		if rec.State != manent.StateError || rec.Rollback != manent.RollbackCompleted {
			t.Fatalf("state %s rollback %q (%s), want ERROR with rollback completed", rec.State, rec.Rollback, rec.Error)
		}
		// Every step that ended sends a step event but notify:started and
		// cleanup; the table lists the steps in the order they ran.
		want := []string{"started"}
		for _, name := range executed(rec.Steps) {
			if name != manent.StepNotifyStarted && name != manent.StepCleanup {
				want = append(want, "step "+name)
			}
		}
		want = append(want, "finished")
		if !slices.Contains(want, "step rollback:activation") || !slices.Contains(want, "step smoke") {
			t.Fatalf("steps run %v: want smoke to fail and be rolled back", executed(rec.Steps))
		}
		enginetest.Eventually(t, 60*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(events) >= len(want)
		}, "the %d callbacks of %s", len(want), id)
		mu.Lock()
		defer mu.Unlock()
		sorted := slices.Clone(events)
		sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Timestamp.Before(sorted[j].Timestamp) })
		var order []string
		for _, ev := range sorted {
			if ev.Deployment.ID != id {
				t.Fatalf("event of deploy %s, want only %s's", ev.Deployment.ID, id)
			}
			name := ev.Type
			if ev.Step != nil {
				name += " " + ev.Step.Name
			}
			order = append(order, name)
		}
		if !slices.Equal(order, want) {
			t.Errorf("events ordered by timestamp:\n got %v\nwant %v", order, want)
		}
	})
}
