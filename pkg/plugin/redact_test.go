package plugin_test

import (
	"reflect"
	"testing"

	"github.com/manent-io/manent/pkg/plugin"
)

func TestRedactSettings(t *testing.T) {
	in := map[string]any{
		"deploy_url": "https://deployer:hunter2@platform.example/api/deploys?team=billing&access_token=abc",
		"headers":    map[string]any{"Authorization": "Bearer t0k", "X-Team": "billing"},
		"env":        map[string]any{"REGION": "eu", "DB_PASSWORD": "pw", "AWS_SECRET_ACCESS_KEY": "k", "RETRIES": 3},
		"api_token":  map[string]any{"nested": "x"},
		"replicas":   2,
		"urls":       []any{"https://cdn.example/a.tgz?X-Amz-Signature=s1&X-Amz-Date=2026"},
		"namespace":  "billing-prod",
	}
	want := map[string]any{
		"deploy_url": "https://deployer:xxxxx@platform.example/api/deploys?access_token=xxxxx&team=billing",
		"headers":    map[string]any{"Authorization": plugin.Redacted, "X-Team": plugin.Redacted},
		"env":        map[string]any{"REGION": "eu", "DB_PASSWORD": plugin.Redacted, "AWS_SECRET_ACCESS_KEY": plugin.Redacted, "RETRIES": 3},
		"api_token":  plugin.Redacted,
		"replicas":   2,
		"urls":       []any{"https://cdn.example/a.tgz?X-Amz-Date=2026&X-Amz-Signature=xxxxx"},
		"namespace":  "billing-prod",
	}
	got := plugin.RedactSettings(in)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RedactSettings:\n got %#v\nwant %#v", got, want)
	}
	if in["headers"].(map[string]any)["Authorization"] != "Bearer t0k" {
		t.Fatal("RedactSettings changed its input: the deploy must run with the original")
	}
	if plugin.RedactSettings(nil) != nil {
		t.Fatal("RedactSettings(nil) is not nil")
	}
	for _, s := range []string{"https://cdn.example/app-1.2.tgz?v=1", "not a url", "ftp://", "/var/lib/x"} {
		if got := plugin.RedactURL(s); got != s {
			t.Errorf("RedactURL(%q) = %q, want it unchanged", s, got)
		}
	}
}

func TestRedactQuery(t *testing.T) {
	for in, want := range map[string]string{
		"https://fn.example/api/hook?code=abc123&region=eu": "https://fn.example/api/hook?code=xxxxx&region=xxxxx",
		"https://bot:pw@chat.example/h?k=1":                 "https://bot:xxxxx@chat.example/h?k=xxxxx",
		"https://ci.example/hook":                           "https://ci.example/hook",
		"https://ci.example/hook?%zz":                       "https://ci.example/hook?xxxxx",
		"not a url":                                         "not a url",
	} {
		if got := plugin.RedactQuery(in); got != want {
			t.Errorf("RedactQuery(%q) = %q, want %q", in, got, want)
		}
	}
}
