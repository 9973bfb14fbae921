package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/plugins/builtin"
)

// A body that does not arrive within the server's read timeout is a 408
// problem saying so — not a 422 "read request body: read tcp
// 127.0.0.1:…->127.0.0.1:…: i/o timeout" naming the connection's
// addresses. The server here has a read timeout of 300 ms; the client
// announces 100 bytes, sends 10 and waits.
func TestSlowBodyIs408(t *testing.T) {
	cfg := servertest.Config(t.TempDir())
	cfg.Database, cfg.ExecutorID = enginetest.SQLite(t), "test"
	ctx := context.Background()
	n, err := node.Open(ctx, cfg, node.Options{Plugins: builtin.Register, BootstrapToken: "admin-token"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(n.API)
	hs.Config.ReadTimeout = 300 * time.Millisecond
	hs.Start()
	t.Cleanup(func() { hs.Close(); n.Close(5 * time.Second) })

	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "POST /api/v1/deployments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-token\r\nContent-Type: application/yaml\r\nContent-Length: 100\r\n\r\napiVersion")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get("Content-Type") != api.ProblemContentType {
		t.Fatalf("%d %s %s, want a 408 problem", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if strings.Contains(string(body), "127.0.0.1") || !strings.Contains(string(body), "did not arrive in time") {
		t.Fatalf("problem %s: want it to say the body came too slowly, without addresses", body)
	}
}
