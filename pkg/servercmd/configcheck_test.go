package servercmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A mistake in manent-server.yaml is reported like a descriptor's: the
// file, line and column, the key as written, what is wrong, a likely
// correction — every mistake of the file at once — and the server exits 2.
func TestConfigMistakesArePlaced(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile(filepath.Join(dir, "bad-rules.yaml"), []byte("freezes:\n  - {environments: [prod], from: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, yaml string
		flags      []string
		want       []string
	}{
		{"typo at the top", "listen: 127.0.0.1:0\nartifact:\n  sources: []\n",
			nil, []string{`manent-server.yaml:2:1: unknown key "artifact" (did you mean "artifacts"?)`}},
		{"typo inside", "governance: {rule: governance.yaml}\n",
			nil, []string{`manent-server.yaml:1:14: unknown key "rule" in governance (did you mean "rules"?)`}},
		{"no likely key", "governance:\n  frobnicate: x\n",
			nil, []string{`manent-server.yaml:2:3: unknown key "frobnicate" in governance; known keys: rego, rules`}},
		{"not a number", "workers:\n  slots: four\n",
			nil, []string{`manent-server.yaml:2:10: workers.slots: "four" is not a whole number`}},
		{"not a duration", "workers: {heartbeat: soon}\n",
			nil, []string{`manent-server.yaml:1:22: workers.heartbeat: "soon" is not a duration (e.g. 5s, 1m30s)`}},
		{"a duration without unit", "workers: {dead_after: 30}\n",
			nil, []string{`manent-server.yaml:1:23: workers.dead_after: 30 is not a duration: give its unit (e.g. 30s)`}},
		{"a mapping for a list", "rbac:\n  subjects: [\"token:ci\"]\n",
			nil, []string{`manent-server.yaml:2:3: rbac: must be a list, got a mapping`}},
		{"a list for text", "listen: [a, b]\n",
			nil, []string{`manent-server.yaml:1:9: listen: must be text, got a list`}},
		{"in a list item", "rbac:\n  - {subjects: [\"token:ci\"], permission: [admin]}\n",
			nil, []string{`manent-server.yaml:2:30: unknown key "permission" in rbac[0] (did you mean "permissions"?)`}},
		{"listen without port", "listen: 17103\n",
			nil, []string{`manent-server.yaml:1:9: listen: "17103" is not host:port (e.g. 127.0.0.1:17103 or :17103)`}},
		{"listen flag", "",
			[]string{"--listen", "17103"}, []string{`--listen: "17103" is not host:port (e.g. 127.0.0.1:17103 or :17103)`}},
		{"a variable", "",
			[]string{"MANENT_WORKERS_SLOTS=four", "MANENT_WORKERS_HEARTBEAT=5"}, []string{
				`MANENT_WORKERS_HEARTBEAT: 5 is not a duration: give its unit (e.g. 5s)`,
				`MANENT_WORKERS_SLOTS: "four" is not a whole number`}},
		{"trusted_proxies not a range", "trusted_proxies: [10.0.0.0/8, 10.0.0.300/32]\n",
			nil, []string{`manent-server.yaml:1:18: trusted_proxies: entry 2, "10.0.0.300/32", is not an address or a CIDR range (e.g. 10.0.0.0/8, 192.0.2.7 or fd00::/8)`}},
		{"max_zip_entries 0", "plugins: {local: {max_zip_entries: 0}}\n",
			nil, []string{`manent-server.yaml:1:36: plugins.local.max_zip_entries: must be at least 1 (default 100000)`}},
		{"validate_timeout 0", "plugins: {validate_timeout: 0s}\n",
			nil, []string{`manent-server.yaml:1:29: plugins.validate_timeout: must be more than 0 and at most 5m0s: a submission waits this long for an external plugin's validate (default 10s)`}},
		{"validate_timeout above 5m", "plugins:\n  validate_timeout: 6m\n",
			nil, []string{`manent-server.yaml:2:21: plugins.validate_timeout: must be more than 0 and at most 5m0s`}},
		{"validate_timeout variable", "",
			[]string{"MANENT_PLUGINS_VALIDATE_TIMEOUT=-1s"}, []string{`MANENT_PLUGINS_VALIDATE_TIMEOUT: must be more than 0 and at most 5m0s`}},
		{"bearer failures 0", "limits: {bearer_failures_per_minute: 0}\n",
			nil, []string{`manent-server.yaml:1:38: limits.bearer_failures_per_minute: must be at least 1 (default 60)`}},
		{"kubeconfig environments not a list", "plugins:\n  kubernetes:\n    kubeconfigs:\n      - /etc/kube/dev.yaml\n      - {path: /etc/kube/prod.yaml, environments: prod}\n",
			nil, []string{`manent-server.yaml:5:9: plugins.kubernetes.kubeconfigs[1]: environments must list the environments (names or patterns such as prod-*) that may use the file; leave it out for every environment`}},
		{"kubeconfig entry typo", "plugins: {kubernetes: {kubeconfigs: [{path: /etc/kube/prod.yaml, environment: [prod]}]}}\n",
			nil, []string{`manent-server.yaml:1:38: plugins.kubernetes.kubeconfigs[0]: unknown key "environment" (known: path, environments)`}},
		{"kubeconfig bad pattern", "plugins: {kubernetes: {kubeconfigs: [{path: /etc/kube/prod.yaml, environments: [\"prod-[\"]}]}}\n",
			nil, []string{`manent-server.yaml:1:38: plugins.kubernetes.kubeconfigs[0]: environments: prod-[ is not an environment name or pattern (e.g. prod, prod-*)`}},
		{"kubeconfig without path", "plugins: {kubernetes: {kubeconfigs: [{environments: [prod]}]}}\n",
			nil, []string{`manent-server.yaml:1:38: plugins.kubernetes.kubeconfigs[0]: path must be the path of a kubeconfig file`}},
		{"unknown log level", "log_level: verbose\n",
			nil, []string{`manent-server.yaml:1:12: log_level: "verbose" is not a log level: debug, info, warn or error`}},
		{"log level variable", "",
			[]string{"MANENT_LOG_LEVEL=warning"}, []string{`MANENT_LOG_LEVEL: "warning" is not a log level: debug, info, warn or error`}},
		{"slots below 1", "workers: {slots: 0}\n",
			nil, []string{`manent-server.yaml:1:18: workers.slots: must be at least 1`}},
		{"heartbeat 0", "workers: {heartbeat: 0s}\n",
			nil, []string{`manent-server.yaml:1:22: workers.heartbeat: must be more than 0 (default 5s)`}},
		{"dead_after 0", "workers: {dead_after: 0s}\n",
			nil, []string{`manent-server.yaml:1:23: workers.dead_after: must be more than 0 (default 30s)`}},
		{"heartbeat negative", "workers: {heartbeat: -5s}\n",
			nil, []string{`manent-server.yaml:1:22: workers.heartbeat: must be more than 0 (default 5s)`}},
		{"dead_after below three heartbeats", "workers: {heartbeat: 10s, dead_after: 20s}\n",
			nil, []string{`manent-server.yaml:1:39: workers.dead_after: 20s must be at least three workers.heartbeat (30s)`}},
		{"heartbeat beyond the default dead_after", "workers: {heartbeat: 20s}\n",
			nil, []string{`workers.dead_after: 30s must be at least three workers.heartbeat (1m0s)`}},
		{"dead_after below three heartbeats by variables", "",
			[]string{"MANENT_WORKERS_HEARTBEAT=2s", "MANENT_WORKERS_DEAD_AFTER=1s"}, []string{
				`MANENT_WORKERS_DEAD_AFTER: 1s must be at least three workers.heartbeat (6s)`}},
		{"days are not a duration", "retention: {deploys: 90d}\n",
			nil, []string{`manent-server.yaml:1:22: retention.deploys: "90d" is not a duration: write days in hours (2160h)`}},
		{"retention negative", "retention: {workflows: -1h, logs: -2h, deploys: -3h}\n",
			nil, []string{
				`manent-server.yaml:1:24: retention.workflows: must not be negative (0 keeps them for ever)`,
				`manent-server.yaml:1:35: retention.logs: must not be negative (0 keeps them for ever)`,
				`manent-server.yaml:1:49: retention.deploys: must not be negative (0 keeps them for ever)`}},
		{"retention every 0", "retention: {every: 0s}\n",
			nil, []string{`manent-server.yaml:1:20: retention.every: must be more than 0 (default 10m0s)`}},
		{"retention every below a second", "retention: {every: 10ms}\n",
			nil, []string{`manent-server.yaml:1:20: retention.every: 10ms is shorter than the scheduler's second: give 1s or more (default 10m0s)`}},
		{"retention of deploys before their workflows", "retention: {workflows: 720h, deploys: 168h}\n",
			nil, []string{`manent-server.yaml:1:39: retention.deploys: 168h0m0s must be at least retention.workflows (720h0m0s): a deploy's DBOS workflows are deleted before it`}},
		{"retention of deploys with workflows kept", "retention: {workflows: 0s, deploys: 720h}\n",
			nil, []string{`manent-server.yaml:1:37: retention.deploys: needs retention.workflows, which is 0 (DBOS rows kept for ever): a deploy's DBOS workflows are deleted before it`}},
		{"retention of deploys below a day", "retention: {workflows: 1h, deploys: 2h}\n",
			nil, []string{`manent-server.yaml:1:37: retention.deploys: 2h0m0s must be at least 24h: an Idempotency-Key's first answer names its deploy for 24h`}},
		{"shutdown_delay negative", "shutdown_delay: -5s\n",
			nil, []string{`manent-server.yaml:1:17: shutdown_delay: must be between 0s and 5m0s (the time load balancers take to stop sending requests, e.g. 10s)`}},
		{"shutdown_delay of an hour", "shutdown_delay: 1h\n",
			nil, []string{`manent-server.yaml:1:17: shutdown_delay: must be between 0s and 5m0s`}},
		{"web.path_prefix without its slash", "web:\n  path_prefix: manent\n",
			nil, []string{`manent-server.yaml:2:16: web.path_prefix: "manent" must start with / (e.g. /manent)`}},
		{"web.path_prefix with a trailing slash", "web: {path_prefix: /manent/}\n",
			nil, []string{`manent-server.yaml:1:20: web.path_prefix: "/manent/" must not end with / (write /manent)`}},
		{"web.path_prefix climbing out", "web: {path_prefix: /tools/../manent}\n",
			nil, []string{`web.path_prefix: "/tools/../manent" has a ".." segment`}},
		{"web.path_prefix with a query", "web: {path_prefix: \"/manent?x=1\"}\n",
			nil, []string{`web.path_prefix: "/manent?x=1" has "?": a prefix is letters, digits, -._~ and / only`}},
		{"web.path_prefix from the environment", "listen: 127.0.0.1:0\n",
			[]string{"MANENT_WEB_PATH_PREFIX=/manent/"}, []string{`MANENT_WEB_PATH_PREFIX: "/manent/" must not end with / (write /manent)`}},
		{"YAML syntax", "listen: 127.0.0.1:0\nworkers: {slots: 2\n",
			nil, []string{`manent-server.yaml:2:10: invalid YAML: the mapping opened with "{" here is not closed`}},
		{"a tab", "listen: 127.0.0.1:0\nworkers:\n\tslots: 2\n",
			nil, []string{`manent-server.yaml:3:1: invalid YAML: `, `indent with spaces`}},
		// auth and rbac were checked later, when the node opened: one
		// section at a time, placed nowhere.
		{"a token's hash", "auth:\n  tokens:\n    - {name: ci, sha256: abc}\n",
			nil, []string{`manent-server.yaml:3:26: auth.tokens[0].sha256: must be the 64 hex digits of the token's SHA-256`}},
		{"an rbac subject that names no identity", "rbac:\n  - subjects: [\"group:deployers\", ci]\n    permissions: [deployment.submit]\n",
			nil, []string{`manent-server.yaml:2:35: rbac[0].subjects[1]: "ci" names no identity`, `did you mean "token:ci", "oidc:ci", "group:ci"?`}},
		{"auth and rbac with the others", "auth:\n  tokens:\n    - {name: \"c i\", sha256: " + strings.Repeat("a", 64) + "}\nrbac:\n  - subjects: [\"token:ci\"]\n    permissions: [deploy]\nlisten: 17103\n",
			nil, []string{
				"3 problems in manent-server.yaml:\n",
				`  manent-server.yaml:3:14: auth.tokens[0].name: token name "c i" must match`,
				`  manent-server.yaml:6:19: rbac[0].permissions[0]: unknown permission "deploy"`,
				`  manent-server.yaml:7:9: listen: "17103" is not host:port`,
			}},
		// governance, environments, artifacts.sources and plugins.steps
		// were checked when the node opened: one section at a time,
		// placed nowhere.
		{"governance rules that are not there", "governance:\n  rules: nosuch.yaml\n",
			nil, []string{`manent-server.yaml:2:10: governance.rules: read governance rules: open ` + filepath.Join(dir, "nosuch.yaml")}},
		{"governance rules and rego", "governance: {rules: a.yaml, rego: b.rego}\n",
			nil, []string{`manent-server.yaml:1:35: governance.rego: set either governance.rules or governance.rego, not both`}},
		{"governance rules with mistakes", "governance: {rules: bad-rules.yaml}\n",
			nil, []string{`manent-server.yaml:1:21: governance.rules: ` + filepath.Join(dir, "bad-rules.yaml") + `: 2 problems` + "\n    " +
				filepath.Join(dir, "bad-rules.yaml") + `:2: freezes[0]: a freeze needs a name`}},
		{"an unknown environments provider", "environments:\n  provider: file\n",
			nil, []string{`manent-server.yaml:2:13: environments.provider: unknown provider "file" (known: files, http, none)`}},
		{"an environments dir that is not there", "environments: {provider: files, dir: nosuch}\n",
			nil, []string{`manent-server.yaml:1:38: environments.dir: stat ` + filepath.Join(dir, "nosuch") + `: no such file or directory`}},
		{"an artifacts source", "artifacts:\n  sources:\n    - file:///srv/artifacts/**\n    - ftp://mirror/**\n",
			nil, []string{`manent-server.yaml:4:7: artifacts.sources[1]: "ftp://mirror/**": scheme "ftp" is not one of file, http, https`}},
		{"a step plugin", "plugins:\n  steps: [scrpt]\n",
			nil, []string{`manent-server.yaml:2:11: plugins.steps[0]: unknown step plugin "scrpt"`}},
		{"a plugins.path entry that is a file", "plugins: {path: [plugins, manent-server.yaml]}\n",
			nil, []string{`manent-server.yaml:1:27: plugins.path[1]: ` + filepath.Join(dir, "manent-server.yaml") + ` is not a directory: give the directory that holds the plugins (files named manent-plugin-<name>)`}},
		{"setup with the others", "governance: {rules: nosuch.yaml}\nartifacts: {sources: [relative]}\nenvironments: {provider: files}\nplugins: {steps: [scrpt]}\nlisten: 17103\n",
			nil, []string{
				"5 problems in manent-server.yaml:\n",
				`  manent-server.yaml:1:21: governance.rules: read governance rules`,
				`  manent-server.yaml:2:23: artifacts.sources[0]: "relative": must look like scheme://host/path`,
				`  manent-server.yaml:3:15: environments.dir: required with provider files`,
				`  manent-server.yaml:4:19: plugins.steps[0]: unknown step plugin "scrpt"`,
				`  manent-server.yaml:5:9: listen: "17103" is not host:port`,
			}},
		{"every mistake at once", "artifact: {}\nworkers:\n  slots: four\n  heartbet: 5s\nlisten: 17103\n",
			nil, []string{
				"4 problems in manent-server.yaml:\n",
				`  manent-server.yaml:1:1: unknown key "artifact" (did you mean "artifacts"?)`,
				`  manent-server.yaml:3:10: workers.slots: "four" is not a whole number`,
				`  manent-server.yaml:4:3: unknown key "heartbet" in workers (did you mean "heartbeat"?)`,
				`  manent-server.yaml:5:9: listen: "17103" is not host:port`,
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(dir, "manent-server.yaml"), []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr lockedBuffer
			args := []string{"serve", "--config", "manent-server.yaml", "--data-dir", filepath.Join(dir, "data")}
			for _, f := range c.flags {
				if k, v, ok := strings.Cut(f, "="); ok {
					t.Setenv(k, v)
				} else {
					args = append(args, f)
				}
			}
			// A mistake that is not refused starts a server, which serves
			// until its context ends and then waits its shutdown_delay
			// (an hour in one case): the case fails as soon as the server
			// listens, and the server is left to stop in the background.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			listening := make(chan struct{})
			stdout.onListen = func() { close(listening) }
			done := make(chan int, 1)
			go func() { done <- Run(ctx, args, &stdout, &stderr, nil) }()
			var code int
			select {
			case code = <-done:
			case <-listening:
				t.Fatalf("%s: not refused: the server started and listens\nstdout:\n%s\nstderr:\n%s", c.name, stdout.String(), stderr.String())
			case <-time.After(2 * time.Minute):
				t.Fatalf("%s: neither refused nor listening after 2m\nstderr:\n%s", c.name, stderr.String())
			}
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			if strings.Contains(stderr.String(), "strconv") || strings.Contains(stderr.String(), "mapstructure") {
				t.Errorf("stderr speaks Go:\n%s", stderr.String())
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer a server that was not refused may go on
// writing to while the test reads it; onListen, when set, is called once
// the server says it listens.
type lockedBuffer struct {
	mu       sync.Mutex
	b        bytes.Buffer
	onListen func()
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.onListen != nil && bytes.Contains(p, []byte(" listening on ")) {
		l.onListen()
		l.onListen = nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Every key of the documented example configuration (SPEC §8.1) loads.
func TestDocumentedConfigLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "manent-server.yaml")
	doc := `listen: 127.0.0.1:8080
data_dir: ./manent-data
database: sqlite:./manent-data/manent.db
executor_id: worker-1
workers: {slots: 4, heartbeat: 5s, dead_after: 30s, retry_base: 1s, max_recovery_attempts: 10}
auth:
  tokens:
    - {name: ci, sha256: "0000000000000000000000000000000000000000000000000000000000000000", groups: [deployers]}
  oidc: {issuer: "https://id.example", audience: manent, claim: email}
rbac:
  - subjects: ["token:ci", "group:deployers"]
    permissions: [deployment.submit, deployment.read]
    applications: ["*"]
    environments: [staging, prod]
artifacts:
  sources: ["file:///srv/artifacts/**", "https://artifacts.example/**"]
  max_bytes: 1073741824
callbacks:
  allow: ["https://ci.example/**"]
  secret_env: MANENT_CALLBACK_SECRET
chat: {ops: "https://hooks.example/x"}
governance:
  rules: governance.yaml
environments: {provider: files, dir: /etc/manent/environments, timeout: 5s, required: false}
descriptor_policy: {allow_target_override: false, parameters: [replicas]}
defaults: &d {slots: 2}
limits: {submissions_per_minute: 120, connections: 6000}
log_level: info
`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadConfig(path, nil)
	if err == nil || !strings.Contains(err.Error(), `unknown key "defaults"`) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v; want only the unknown key defaults", err)
	}
	doc = strings.Replace(doc, "defaults: &d {slots: 2}\n", "", 1)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(path, nil); err != nil {
		t.Fatal(err)
	}
	// auth.oidc.require_email_verified: unset is nil (true), false is kept.
	doc = strings.Replace(doc, "claim: email}", "claim: email, require_email_verified: false}", 1)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Auth.OIDC.RequireEmailVerified; r == nil || *r {
		t.Fatalf("auth.oidc.require_email_verified: false loaded as %v", r)
	}
}

// A MANENT_* variable that is nearly a key's (MANENT_WORKER_SLOTS) was
// ignored without a word; serve now warns, naming the variable meant. The
// other MANENT_* variables manent and its tests read are not taken for
// typos.
func TestStrayVariables(t *testing.T) {
	cfg, err := loadConfig("", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Callbacks.SecretEnv = "MANENT_LISTN" // named by the configuration: not a typo
	environ := []string{"PATH=/bin", "MANENT_WORKER_SLOTS=8", "MANENT_WORKERS_SLOTS=2", "MANENT_DATADIR=/srv", "MANENT_LISTN=x"}
	for _, v := range []string{"MANENT_BOOTSTRAP_TOKEN", "MANENT_CALLBACK_SECRET", "MANENT_CONFIG", "MANENT_CONTEXT", "MANENT_DEPLOY_ID",
		"MANENT_FOLLOW_GRACE", "MANENT_FORCE_TTY", "MANENT_PLUGIN_PROTOCOL", "MANENT_PROCS_LIFELINE", "MANENT_PROCS_LIFELINE_GRACE",
		"MANENT_REQUEST_TIMEOUT", "MANENT_SERVER", "MANENT_STEP", "MANENT_TEST_DEAD_AFTER", "MANENT_TEST_HEARTBEAT",
		"MANENT_TEST_POSTGRES", "MANENT_TEST_REQUIRE_POSTGRES", "MANENT_TOKEN", "MANENT_VERSION", "MANENT_WORKDIR",
		"MANENT_ARTIFACT", "MANENT_ACTION", "MANENT_CLUSTER", "MANENT_ROLLOUT_WAVE", "MANENT_UPGRADE_FROM", "MANENT_K8S_BIN_DIR"} {
		environ = append(environ, v+"=x")
	}
	got := strayVariables(cfg, environ)
	want := []string{
		"MANENT_DATADIR is no variable of manent-server: it is ignored (did you mean MANENT_DATA_DIR?)",
		"MANENT_WORKER_SLOTS is no variable of manent-server: it is ignored (did you mean MANENT_WORKERS_SLOTS?)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// serve logs it.
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // the trial server's record
	t.Setenv("MANENT_WORKER_SLOTS", "8")
	if out := serveUntilListening(t, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir()); !strings.Contains(out, `"level":"WARN","msg":"MANENT_WORKER_SLOTS is no variable of manent-server: it is ignored (did you mean MANENT_WORKERS_SLOTS?)"`) {
		t.Fatalf("serve did not warn of MANENT_WORKER_SLOTS:\n%s", out)
	}
}

// A configured server that can accept no credential (no auth.tokens, no
// auth.oidc, no MANENT_BOOTSTRAP_TOKEN) refuses every request 401; it
// started without a word, and now warns, saying what to add.
func TestServeWarnsWhenNoCredentialCanBeAccepted(t *testing.T) {
	t.Setenv("MANENT_BOOTSTRAP_TOKEN", "")
	dir := t.TempDir()
	const warning = `"level":"WARN","msg":"no credential can be accepted: the configuration has no auth.tokens and no auth.oidc`
	for _, c := range []struct {
		name, yaml string
		warn       bool
	}{
		{"listen only", "listen: 127.0.0.1:0\n", true},
		{"a token", "listen: 127.0.0.1:0\nauth:\n  tokens:\n    - {name: ci, sha256: \"" + strings.Repeat("0", 64) + "\"}\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".yaml")
			if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			out := serveUntilListening(t, "--config", path, "--data-dir", filepath.Join(dir, c.name))
			if got := strings.Contains(out, warning); got != c.warn {
				t.Fatalf("warned %v, want %v:\n%s", got, c.warn, out)
			}
		})
	}
}

// A token:<name> pattern naming no token of auth.tokens (nor the bootstrap
// token's "admin" while MANENT_BOOTSTRAP_TOKEN is set) matches no one: an
// rbac subject granted nothing, an approver could never approve, a
// freeze's allow let no one through, without a word. serve warns at start,
// naming it and the tokens there are; it does not refuse (a fleet running
// such a configuration would not start after an upgrade).
func TestServeWarnsOfTokenPatternsNamingNoToken(t *testing.T) {
	dir := t.TempDir()
	const warn = `names no token of auth.tokens`
	gov := filepath.Join(dir, "governance.yaml")
	if err := os.WriteFile(gov, []byte(`approvals:
  - {environments: [prod], count: 1, approvers: ["token:relase", "token:ci-*", "group:sre"]}
freezes:
  - {name: xmas, from: "2026-12-20T00:00:00Z", to: "2026-12-27T00:00:00Z", allow: ["token:ci"]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	hash := strings.Repeat("0", 64)
	cfg := "listen: 127.0.0.1:0\n" +
		"auth:\n  tokens:\n    - {name: ci, sha256: \"" + hash + "\"}\n    - {name: release, sha256: \"" + strings.Repeat("1", 64) + "\"}\n" +
		"rbac:\n  - {subjects: [\"token:ci\", \"token:deployer\", \"token:admin\", \"oidc:*\"], permissions: [deployment.read]}\n" +
		"governance: {rules: governance.yaml}\n"
	path := filepath.Join(dir, "manent-server.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, bootstrap string
		want, not       []string
	}{
		{"no bootstrap token", "", []string{
			`rbac[0].subjects[1]: \"token:deployer\" ` + warn + ` (ci, release)`,
			`rbac[0].subjects[2]: \"token:admin\" ` + warn + ` (ci, release); it is the identity of MANENT_BOOTSTRAP_TOKEN, which is not set`,
			`approvals[0].approvers[0]: \"token:relase\" ` + warn + ` (ci, release)`,
		}, []string{`\"token:ci\" `, `\"token:ci-*\"`, `freezes[0]`}},
		{"bootstrap token", "mnt_" + strings.Repeat("b", 32), []string{
			`rbac[0].subjects[1]: \"token:deployer\" ` + warn,
		}, []string{`\"token:admin\" `}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("MANENT_BOOTSTRAP_TOKEN", c.bootstrap)
			out := serveUntilListening(t, "--config", path, "--data-dir", filepath.Join(dir, c.name))
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("no warning %s in:\n%s", w, out)
				}
			}
			for _, n := range c.not {
				if strings.Contains(out, n) {
					t.Errorf("a warning about %s in:\n%s", n, out)
				}
			}
		})
	}
}

// serveUntilListening runs serve with args until it listens, stops it and
// returns what it wrote to stderr; a serve that exits before listening,
// or does not listen within 2 minutes, fails the test.
func serveUntilListening(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listening := make(chan struct{})
	stdout.onListen = func() { close(listening) }
	done := make(chan int, 1)
	go func() { done <- Run(ctx, append([]string{"serve"}, args...), &stdout, &stderr, nil) }()
	select {
	case <-listening:
	case code := <-done:
		t.Fatalf("exit %d before listening: %s", code, stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("not listening after 2m")
	}
	cancel()
	<-done
	return stderr.String()
}

// A plugins.path directory that does not exist was skipped without a word:
// a mistyped one came to light as "unknown plugin" at deploy time. serve
// warns at start, naming the key, its place and the directory; one that
// exists is not named.
func TestServeWarnsOfMissingPluginDirs(t *testing.T) {
	t.Setenv("MANENT_BOOTSTRAP_TOKEN", "")
	dir := t.TempDir()
	there := filepath.Join(dir, "plugins")
	if err := os.Mkdir(there, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "manent-server.yaml")
	if err := os.WriteFile(path, []byte("listen: 127.0.0.1:0\nplugins:\n  path:\n    - plugins\n    - /nonexistent/manent-plugns\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := serveUntilListening(t, "--config", path, "--data-dir", filepath.Join(dir, "data"))
	want := `"level":"WARN","msg":"plugins.path directory /nonexistent/manent-plugns does not exist (plugins.path[1] at ` + path + `:5:7): no external plugin is found there`
	if !strings.Contains(out, want) {
		t.Fatalf("serve did not warn of the missing plugins.path directory: want %s in\n%s", want, out)
	}
	if strings.Contains(out, "plugins.path directory "+there) {
		t.Fatalf("serve warned of a plugins.path directory that exists:\n%s", out)
	}

	// One value for the list, from a variable.
	t.Setenv("MANENT_PLUGINS_PATH", "/nonexistent/other")
	out = serveUntilListening(t, "--config", path, "--data-dir", filepath.Join(dir, "data"))
	if want := `plugins.path directory /nonexistent/other does not exist (MANENT_PLUGINS_PATH)`; !strings.Contains(out, want) {
		t.Fatalf("want %s in\n%s", want, out)
	}
}
