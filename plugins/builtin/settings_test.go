package builtin_test

import (
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/clusterready"
	httpplugin "github.com/manent-io/manent/plugins/http"
	"github.com/manent-io/manent/plugins/kubernetes"
	"github.com/manent-io/manent/plugins/local"
	"github.com/manent-io/manent/plugins/script"
)

// Every built-in plugin refuses, at validation, what its run would ignore
// or read otherwise (SPEC §11.2: the dry run says what the run does): a
// setting it does not know — naming the close one and all it knows — and
// a value of the wrong type or out of range, each at its own setting.
func TestBuiltinsRefuseUnknownAndMistypedSettings(t *testing.T) {
	root := t.TempDir()
	for _, tc := range []struct {
		name string
		p    interface{ Validate(map[string]any) error }
		base map[string]any
		// typo is an unknown key one edit from want.
		typo, want string
		known      string
		// bad are values the plugin must refuse at their key.
		bad []map[string]any
	}{
		{
			name: "script", p: script.New(script.Options{}),
			base: map[string]any{"command": []any{"true"}},
			typo: "timout", want: "timeout", known: "command, env, timeout",
			bad: []map[string]any{
				{"timeout": 1}, {"timeout": 1.5}, {"timeout": "0s"}, {"timeout": "-1s"}, {"timeout": ""}, {"timeout": "soon"},
				{"timeout": true}, {"command": "echo hi"}, {"command": []any{"true", 1}}, {"env": "A=1"},
			},
		},
		{
			name: "local", p: local.New(local.Options{Root: root}),
			base: map[string]any{"dir": filepath.Join(root, "app")},
			typo: "keep_release", want: "keep_releases", known: "dir, keep_releases",
			bad: []map[string]any{{"dir": 5}, {"dir": []any{"/x"}}, {"keep_releases": "5"}, {"keep_releases": 1}, {"keep_releases": 2.5}},
		},
		{
			name: "http", p: httpplugin.New(nil),
			base: map[string]any{"deploy_url": "https://platform.example/deploys"},
			typo: "poll_intervall", want: "poll_interval",
			known: "activate_url, deploy_url, done, failed, headers, health_url, live_url, method, percentages, poll_interval, poll_timeout, rollback_url, status_field, status_url, timeout",
			bad: []map[string]any{
				{"timeout": 30}, {"poll_timeout": "-1s"}, {"poll_interval": ""}, {"percentages": "yes"}, {"headers": "x"},
				{"method": 1}, {"done": "done"}, {"failed": []any{map[string]any{"a": 1}}}, {"status_url": 3},
			},
		},
		{
			name: "kubernetes", p: kubernetes.New(kubernetes.Options{}),
			base: map[string]any{},
			typo: "namespce", want: "namespace", known: "cluster, context, image, kubeconfig, manifests, namespace, timeout, wait",
			bad: []map[string]any{{"timeout": 300}, {"timeout": "0s"}, {"wait": "yes"}, {"namespace": 1}},
		},
		{
			name: "cluster-ready", p: clusterready.New(nil),
			base: map[string]any{"cluster": "prod-eu"},
			typo: "stale_afer", want: "stale_after", known: "cluster, stale_after, timeout",
			bad: []map[string]any{{"timeout": 10}, {"stale_after": "0s"}, {"timeout": ""}, {"cluster": 5}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.p.Validate(tc.base); err != nil {
				t.Fatalf("Validate(%v) = %v, want nil", tc.base, err)
			}
			with := maps.Clone(tc.base)
			with[tc.typo] = "1s"
			ses := plugin.SettingErrors(tc.p.Validate(with))
			if len(ses) != 1 || ses[0].Path != tc.typo {
				t.Fatalf("with %v: setting errors %v, want one at %q", with, ses, tc.typo)
			}
			if msg := ses[0].Error(); !strings.Contains(msg, `did you mean "`+tc.want+`"?`) || !strings.Contains(msg, "known: "+tc.known+")") {
				t.Errorf("unknown setting: %q, want it to suggest %q and list %q", msg, tc.want, tc.known)
			}
			for _, bad := range tc.bad {
				with := maps.Clone(tc.base)
				maps.Copy(with, bad)
				var key string
				for k := range bad {
					key = k
				}
				ses := plugin.SettingErrors(tc.p.Validate(with))
				if len(ses) == 0 || !strings.HasPrefix(ses[0].Path, key) || !strings.Contains(ses[0].Error(), "with."+key) {
					t.Errorf("with %v: setting errors %v, want one at %q naming with.%s", with, ses, key, key)
				}
			}
			// Every problem at once: an unknown setting and a bad value.
			with = maps.Clone(tc.base)
			maps.Copy(with, tc.bad[0])
			with[tc.typo] = "1s"
			if ses := plugin.SettingErrors(tc.p.Validate(with)); len(ses) != 2 {
				t.Errorf("with %v: setting errors %v, want two (the unknown key and the bad value)", with, ses)
			}
		})
	}
}
