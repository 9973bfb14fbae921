package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// A number in with.env reaches the command as it was written, after the
// deploy went through JSON and the durable workflow's input: a build
// number stays 12345678, not 1.2345678e+07.
func TestEnvNumbersReachTheStepAsWritten(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	c := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	desc := fmt.Sprintf(`apiVersion: manent/v1
application: billing
environment: staging
version: "1"
artifact: {url: %q}
steps:
  - name: show
    before: deploy
    plugin: script
    with:
      command: [sh, -c, 'echo "build=$BUILD_NUMBER ratio=$RATIO big=$BIG neg=$NEG"']
      env: {BUILD_NUMBER: 12345678, RATIO: 1.5, BIG: 9007199254740992, NEG: -100000000}
`, artifactFile(t))
	res, err := c.Submit(ctx, []byte(desc), false)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if d, err := c.Wait(wctx, res.ID, 50*time.Millisecond); err != nil || d.State != manent.StateSuccess {
		t.Fatalf("deploy: %v %+v", err, d)
	}
	logs, err := c.Logs(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range logs.Lines {
		if l.Step == "show" {
			got = append(got, l.Text)
		}
	}
	want := "build=12345678 ratio=1.5 big=9007199254740992 neg=-100000000"
	if !strings.Contains(strings.Join(got, "\n"), want) {
		t.Fatalf("the step printed %q, want %q", got, want)
	}
}
