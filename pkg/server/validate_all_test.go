package server_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// Every problem at once (SPEC §2): the descriptor's own (placement of a
// step, rollback.on) and those of the server's checks on it (an unknown
// plugin, its settings) in one 422, ordered by position — to a caller
// allowed to ask. One that is not (no token, or no permission) gets the
// descriptor's own problems, as before it authenticates (SPEC §3 order).
func TestValidateReportsDescriptorAndPluginProblemsAtOnce(t *testing.T) {
	t.Parallel()
	tokens := []auth.TokenConfig{{Name: "reader", SHA256: auth.HashToken("reader-token")}}
	rules := []auth.RBACRule{{Subjects: []string{"token:reader"}, Permissions: []string{"deployment.read"},
		Applications: []string{"*"}, Environments: []string{"*"}}}
	srv := newTestServer(t, enginetest.SQLite(t), tokens, rules)
	desc := simple(artifactFile(t), "staging", "1", `rollback: {on: [deploy, smok]}
steps:
  - name: check
    before: actvation
    plugin: script
    with: {command: "echo hi"}
  - {name: other, after: deploy, plugin: scrip}
`)
	problems := func(token string, dry bool) []string {
		t.Helper()
		_, err := api.NewClient(srv.URL, token, nil).Submit(context.Background(), desc, dry)
		var me *manent.Error
		if !errorsAs(err, &me) || me.Code != manent.EInvalid {
			t.Fatalf("token %q dry run %v: %v, want a 422", token, dry, err)
		}
		var out []string
		for _, f := range me.Fields {
			out = append(out, fmt.Sprintf("%d:%d %s", f.Line, f.Column, f.Path))
		}
		return out
	}
	all := []string{"6:25 /rollback/on/1", "9:13 /steps/0/before", "11:21 /steps/0/with/command", "12:42 /steps/1/plugin"}
	for _, dry := range []bool{true, false} {
		if got := problems("admin-token", dry); fmt.Sprint(got) != fmt.Sprint(all) {
			t.Errorf("dry run %v: problems %v, want %v", dry, got, all)
		}
	}
	own := []string{"6:25 /rollback/on/1", "9:13 /steps/0/before"}
	for _, token := range []string{"", "wrong-token", "reader-token"} {
		if got := problems(token, true); fmt.Sprint(got) != fmt.Sprint(own) {
			t.Errorf("token %q: problems %v, want the descriptor's own only: %v", token, got, own)
		}
	}
}
