package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// A kubeconfig runs commands (exec credentials) and sends files (tokenFile)
// as the server: in a configured server a descriptor may name only the
// files of plugins.kubernetes.kubeconfigs (none by default), refused with
// a 422 at /target/with/kubeconfig before anything runs (SPEC §11.1). The
// kubeconfig here would write a marker file if its exec entry ever ran.
func TestKubeconfigAllowList(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "exec-ran")
	planted := filepath.Join(dir, "planted.yaml")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, "touch %s"], interactiveMode: Never}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, marker)
	if err := os.WriteFile(planted, []byte(kc), 0o644); err != nil {
		t.Fatal(err)
	}
	allowed := filepath.Join(dir, "prod.yaml")
	for _, tc := range []struct {
		name string
		list []string
		path string
		want string // a fragment of the 422's message at /target/with/kubeconfig; "" admitted
	}{
		{"none listed", nil, planted, "this server allows no kubeconfig file"},
		{"not listed", []string{allowed}, planted, "is not one of this server's kubeconfig files (plugins.kubernetes.kubeconfigs: " + allowed + ")"},
		{"relative", []string{allowed}, "prod.yaml", "is not one of this server's kubeconfig files"},
		{"listed", []string{allowed}, filepath.Join(dir, ".", "prod.yaml"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newTestServer(t, enginetest.SQLite(t), nil, nil, func(c *node.Config) {
				configured(c)
				c.Plugins.Kubernetes.Kubeconfigs = nil
				for _, f := range tc.list {
					c.Plugins.Kubernetes.Kubeconfigs = append(c.Plugins.Kubernetes.Kubeconfigs, f)
				}
			})
			c := api.NewClient(srv.URL, "admin-token", nil)
			desc := fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: staging\nversion: \"1\"\nartifact: {url: %q}\ntarget: {plugin: kubernetes, with: {kubeconfig: %q}}\n", artifactFile(t), tc.path)
			for _, dry := range []bool{true, false} {
				_, err := c.Submit(context.Background(), []byte(desc), dry)
				if tc.want == "" {
					if err != nil {
						t.Fatalf("dry run %v: a listed kubeconfig refused: %v", dry, err)
					}
					continue
				}
				var me *manent.Error
				if !errorsAs(err, &me) || me.Code != manent.EInvalid {
					t.Fatalf("dry run %v: got %v, want a 422", dry, err)
				}
				found := false
				for _, f := range me.Fields {
					found = found || f.Path == "/target/with/kubeconfig" && strings.Contains(f.Message, tc.want)
				}
				if !found {
					t.Fatalf("dry run %v: errors %+v, want /target/with/kubeconfig: …%s…", dry, me.Fields, tc.want)
				}
			}
		})
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the planted kubeconfig's exec command ran")
	}
}
