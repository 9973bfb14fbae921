package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// `after:` may name only deploys the submitter may read: waiting on another
// scope's deploy would tell its outcome ("dependency … ended REJECTED").
// Such a deploy is answered as one that does not exist, so the answer does
// not tell its existence either.
func TestAfterNamesOnlyReadableDeploys(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), matrixTokens, matrixPolicy)
	ctx := context.Background()
	admin := api.NewClient(srv.URL, "admin-token", nil)
	right := api.NewClient(srv.URL, "right-token", nil) // billing/staging only
	art := artifactFile(t)
	desc := func(env, extra string) []byte {
		return []byte(fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: %s\nversion: \"1\"\nartifact: {url: %q}\n%s", env, art, extra))
	}
	other, err := admin.Submit(ctx, desc("prod", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	own, err := right.Submit(ctx, desc("staging", ""), false)
	if err != nil {
		t.Fatal(err)
	}

	for _, dry := range []bool{true, false} {
		_, err = right.Submit(ctx, desc("staging", "after: [dpl_01M9ZZZZZZZZZZZZZZZZZZZZZZ, "+other.ID+"]\n"), dry)
		var me *manent.Error
		if !errorsAs(err, &me) || me.Code != manent.EInvalid || len(me.Fields) != 2 {
			t.Fatalf("dry run %v: after another scope's deploy: %v, want a 422 with two field errors", dry, err)
		}
		missing, hidden := me.Fields[0], me.Fields[1]
		if hidden.Path != "/after/1" || hidden.Message != "deploy "+other.ID+" does not exist" ||
			!strings.HasSuffix(missing.Message, " does not exist") {
			t.Fatalf("dry run %v: field errors %+v: want the unreadable deploy answered as the missing one", dry, me.Fields)
		}
	}
	if _, err := right.Submit(ctx, desc("staging", "after: ["+own.ID+"]\n"), false); err != nil {
		t.Fatalf("after a deploy of its own scope: %v", err)
	}
}
