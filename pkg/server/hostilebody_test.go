package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
)

// sendBody sends body to url with the admin token and the given headers, and
// returns the status and the problem answered.
func sendBody(t *testing.T, method, url string, body []byte, headers ...string) (int, string, api.Problem) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer admin-token")
	if bytes.HasPrefix(body, []byte("{")) {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p api.Problem
	_ = json.Unmarshal(b, &p)
	return resp.StatusCode, resp.Header.Get("Content-Type"), p
}

// The JSON bodies of the write routes are read once, as one object: a key
// given twice, what follows the object and a byte that is not UTF-8 are
// 422s saying where — encoding/json kept the last of two keys, read past
// nothing after the first object, and made a bad byte U+FFFD. A body
// compressed (Content-Encoding) is a 415 on every route: the server
// never inflates one, so no zip bomb, and it was read as the compressed
// bytes ("not UTF-8 text: invalid byte 0x8b").
func TestHostileBodies(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, enginetest.SQLite(t), nil, nil)
	rollback := ts.URL + "/api/v1/environments/billing/prod/rollback"
	report := ts.URL + "/api/v1/agent/reports"
	snap := `{"cluster": "c1", "time": "` + time.Now().UTC().Format(time.RFC3339) + `", "pods": [], "workloads": []`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("apiVersion: manent/v1\n"))
	_ = zw.Close()
	for _, tt := range []struct {
		name, method, url string
		body              []byte
		headers           []string
		status            int
		want              string
	}{
		{"rollback duplicate key", "POST", rollback, []byte(`{"to": "1.0", "to": "2.0"}`), nil,
			422, `rollback request: the key "to" is given twice (at byte 2 and at byte 15): give it once`},
		{"rollback trailing", "POST", rollback, []byte(`{"to": "1.0"} {"to": "2.0"}`), nil,
			422, "the body goes on at byte 15 after the JSON object"},
		{"rollback not UTF-8", "POST", rollback, []byte("{\"to\": \"1.\xff\"}"), nil,
			422, "invalid byte 0xff at byte 11"},
		{"report duplicate cluster", "POST", report, []byte(snap + `, "cluster": "c2"}`), nil,
			422, `the body is not a snapshot: the key "cluster" is given twice`},
		{"report trailing", "POST", report, []byte(snap + "}\x1b[2J"), nil,
			422, "the body goes on at byte"},
		{"submit gzip", "POST", ts.URL + "/api/v1/deployments", gz.Bytes(), []string{"Content-Encoding", "gzip"},
			415, "Content-Encoding gzip: the server reads request bodies as sent; send the body uncompressed, without Content-Encoding"},
		{"report deflate", "POST", report, []byte("x"), []string{"Content-Encoding", "deflate"},
			415, "Content-Encoding deflate"},
		{"rollback gzip, br", "POST", rollback, []byte("x"), []string{"Content-Encoding", "gzip, br"},
			415, "Content-Encoding gzip, br"},
	} {
		code, ct, p := sendBody(t, tt.method, tt.url, tt.body, tt.headers...)
		if code != tt.status || ct != api.ProblemContentType || !strings.Contains(p.Detail, tt.want) {
			t.Errorf("%s: %d %s %q, want %d problem+json with %q", tt.name, code, ct, p.Detail, tt.status, tt.want)
		}
	}
	// identity is no encoding.
	if code, _, p := sendBody(t, "POST", rollback, []byte(`{"to": "1.0"}`), "Content-Encoding", "identity"); code != http.StatusConflict {
		t.Errorf("Content-Encoding identity: %d %q, want the 409 of an environment with nothing to roll back", code, p.Detail)
	}
}
