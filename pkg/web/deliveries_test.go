package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// The deploy page lists its callbacks and chat messages with their state,
// attempts and error, as `manent status` does: a callback the receiver
// refuses is visible on the page, not only in the CLI. The URL shown is
// the one the API gives (no query: it may hold a token).
func TestDeployPageShowsDeliveries(t *testing.T) {
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such hook", http.StatusNotFound)
	}))
	defer recv.Close()
	t.Setenv("WEB_TEST_CALLBACK_SECRET", "0123456789abcdef0123456789abcdef")
	s := startUI(t, func(c *node.Config) {
		c.Callbacks.Allow = []string{"http://127.0.0.1:*/**"}
		c.Callbacks.SecretEnv = "WEB_TEST_CALLBACK_SECRET"
	})
	g := s.gate(t, "g")
	open(t, g)
	desc := string(gatedDeploy(t, "staging", "1.0", g)) + fmt.Sprintf("callbacks:\n  - {url: %q, events: [finished]}\n", recv.URL+"/hook?token=s3cret")
	id := s.submit(t, "alice-token", []byte(desc))
	s.waitState(t, id, manent.StateSuccess)

	b := newBrowser(t, s.URL)
	b.login("vera-token")
	var p page
	enginetest.Eventually(t, 60*time.Second, func() bool {
		p = b.get("/deployments/" + id)
		// The attempt's error is recorded a moment before the delivery
		// is marked failed: wait for both.
		return strings.Contains(p.Body, "receiver answered 404 Not Found: no such hook") && strings.Contains(p.Body, "state-failed")
	}, "the refused callback on the deploy page, failed")
	for _, want := range []string{"Callbacks and messages", "finished", recv.URL + "/hook", "failed"} {
		if !strings.Contains(p.Body, want) {
			t.Errorf("no %q in the deploy page:\n%s", want, p.Body)
		}
	}
	if strings.Contains(p.Body, "s3cret") {
		t.Errorf("the callback's query is on the page")
	}
}
