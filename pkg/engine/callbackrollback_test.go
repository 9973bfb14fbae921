package engine_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/plan"
)

// A rollback's callbacks go to the URLs of the descriptor it reuses — an
// old pipeline's hook may receive them — so they say that it is one:
// "rollback_of" names the deploy it goes back from; a plain deploy's
// events carry no such field.
func TestCallbacksOfARollbackSaySo(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]map[string]any{} // deploy id → its events' deployment objects
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var ev struct {
			Type       string         `json:"type"`
			Deployment map[string]any `json:"deployment"`
		}
		if json.Unmarshal(b, &ev) == nil && (ev.Type == "started" || ev.Type == "finished") {
			mu.Lock()
			id, _ := ev.Deployment["id"].(string)
			got[id] = append(got[id], ev.Deployment)
			mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	t.Setenv("TEST_CALLBACK_SECRET", "whsec_"+base64.StdEncoding.EncodeToString([]byte("rollback-callback-secret")))
	f := newFixture(t, enginetest.SQLite(t), 2, func(c *node.Config) {
		c.Callbacks.Allow = []string{"http://127.0.0.1:*/**"}
		c.Callbacks.SecretEnv = "TEST_CALLBACK_SECRET"
	})
	url, _ := f.artifact("v1", "x")
	cb := fmt.Sprintf("callbacks:\n  - {url: %s/hook, events: [started, finished]}\n", recv.URL)
	first := f.submit(descriptorYAML("cb", "prod", "1", url, "", cb))
	if rec := f.wait(first, 30*time.Second); rec.State != manent.StateSuccess {
		t.Fatalf("%s: state %s (%s)", first, rec.State, rec.Error)
	}
	rollback := f.submit(descriptorYAML("cb", "prod", "1", url, "", cb), func(in *plan.Input) { in.RollbackOf = first })
	if rec := f.wait(rollback, 30*time.Second); rec.State != manent.StateSuccess {
		t.Fatalf("%s: state %s (%s)", rollback, rec.State, rec.Error)
	}
	enginetest.Eventually(t, 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got[first]) == 2 && len(got[rollback]) == 2
	}, "the started and finished callbacks of both deploys")
	mu.Lock()
	defer mu.Unlock()
	for _, d := range got[rollback] {
		if d["rollback_of"] != first {
			t.Errorf("a rollback's callback: deployment %v, want rollback_of %s", d, first)
		}
	}
	for _, d := range got[first] {
		if _, has := d["rollback_of"]; has {
			t.Errorf("a plain deploy's callback: deployment %v has rollback_of", d)
		}
	}
}
