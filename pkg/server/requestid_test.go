package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
)

// An X-Request-Id a client sends is kept only when it is at most 128
// visible ASCII characters; any other is replaced by one the server makes.
// HTTP lets a header carry tabs and any byte above 0x7f: such an id went
// as it was into the response, the log and the audit log — a tab splitting
// `manent audit`'s columns, a C1 CSI (U+009B) or a bidi override for the
// terminal of whoever reads it, and bytes that are not UTF-8, which
// PostgreSQL refuses, so the audited submission failed with a 500.
func TestRequestIDIsVisibleASCII(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newTestServer(t, db, nil, nil)
		art := artifactFile(t)
		ids := []struct {
			name, sent string
			kept       bool
		}{
			{"ci run", "ci-1234_build.7:deploy/a+b=c", true},
			{"128 characters", strings.Repeat("r", 128), true},
			{"129 characters", strings.Repeat("r", 129), false},
			{"tab", "a\tb", false},
			{"space", "a b", false},
			{"C1 CSI", "a\u009b31mred", false},
			{"bidi override", "a\u202eb", false},
			{"not UTF-8", "a\xffb", false},
		}
		for i, tc := range ids {
			t.Run(tc.name, func(t *testing.T) {
				req, err := http.NewRequest("POST", srv.URL+"/api/v1/deployments", strings.NewReader(string(simple(art, "staging", string(rune('a'+i)), ""))))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer admin-token")
				req.Header.Set("X-Request-Id", tc.sent)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					t.Fatalf("submit with X-Request-Id %q: %d, want 202", tc.sent, resp.StatusCode)
				}
				got := resp.Header.Get("X-Request-Id")
				if tc.kept && got != tc.sent {
					t.Fatalf("X-Request-Id %q answered as %q, want it kept", tc.sent, got)
				}
				if !tc.kept && (got == tc.sent || !strings.HasPrefix(got, "req_")) {
					t.Fatalf("X-Request-Id %q answered as %q, want one the server made (req_…)", tc.sent, got)
				}
				audit, err := api.NewClient(srv.URL, "admin-token", nil).Audit(context.Background(), "deployment.submit", 0, 1)
				if err != nil {
					t.Fatal(err)
				}
				if len(audit.Items) != 1 || audit.Items[0].RequestID != got {
					t.Fatalf("audit entry %+v, want the submission's with request id %q", audit.Items, got)
				}
			})
		}
	})
}
