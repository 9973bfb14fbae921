package servercmd

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/budget"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/pkg/suggest"
	"github.com/manent-io/manent/pkg/web"
	"github.com/manent-io/manent/pkg/yamlvalue"
	"github.com/manent-io/manent/plugins/external"
	"github.com/manent-io/manent/plugins/local"
)

// configProblems are the mistakes found in a server configuration, each
// "file:line:column: what is wrong" like a descriptor's, all of them at
// once.
type configProblems struct {
	file string
	list []configProblem
	more int // problems past maxConfigProblems, not listed
	// keys are the keys whose values have a problem already.
	keys map[string]bool
}

// maxConfigProblems bounds the problems listed (a hostile or mangled file
// of 1 MiB is refused with a screenful, not a million lines).
const maxConfigProblems = 50

func (p *configProblems) Error() string {
	if len(p.list) == 1 && p.more == 0 {
		return p.list[0].text
	}
	where := p.file
	if where == "" || p.list[len(p.list)-1].line == 0 {
		where = "the configuration" // flags or MANENT_* variables too
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems in %s:", len(p.list)+p.more, where)
	for _, l := range p.list {
		b.WriteString("\n  " + l.text)
	}
	if p.more > 0 {
		fmt.Fprintf(&b, "\n  … and %d more", p.more)
	}
	return b.String()
}

// add records a problem at n (nil: no position), "key: " prefixed by the
// caller when it concerns a value.
func (p *configProblems) add(n *yaml.Node, format string, args ...any) {
	if len(p.list) >= maxConfigProblems {
		p.more++
		return
	}
	pr := configProblem{text: fmt.Sprintf(format, args...)}
	if n != nil && n.Line > 0 && p.file != "" {
		pr.line, pr.col = n.Line, n.Column
		pr.text = fmt.Sprintf("%s:%d:%d: %s", p.file, n.Line, n.Column, pr.text)
	}
	// In the order of the file; the problems without a place (a flag, a
	// variable) after.
	i, _ := slices.BinarySearchFunc(p.list, pr, func(a, b configProblem) int {
		if (a.line == 0) != (b.line == 0) {
			return cmp.Compare(b.line, a.line)
		}
		return cmp.Or(cmp.Compare(a.line, b.line), cmp.Compare(a.col, b.col), 1)
	})
	p.list = slices.Insert(p.list, i, pr)
}

type configProblem struct {
	line, col int // 0: no place in the file
	text      string
}

// bad records a problem with the value of key at n.
func (p *configProblems) bad(n *yaml.Node, key, format string, args ...any) {
	if p.keys == nil {
		p.keys = map[string]bool{}
	}
	p.keys[key] = true
	p.add(n, "%s: %s", key, fmt.Sprintf(format, args...))
}

func (p *configProblems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return p
}

// configChecker walks the YAML of manent-server.yaml beside the type it
// decodes into (node.Config, by its mapstructure tags, as viper reads it:
// keys in any case, a single value for a list), reporting unknown keys and
// values of the wrong kind with their positions. It records each key's
// value node, so that later checks (listen, workers.slots) are placed too.
type configChecker struct {
	problems *configProblems
	at       map[string]*yaml.Node
	visits   int
}

// maxConfigVisits bounds the walk through aliases (a "billion laughs" file).
const maxConfigVisits = 100_000

var durationType = reflect.TypeFor[time.Duration]()

// checkConfigYAML checks data, the text of the configuration file named
// file, and returns the value node of each key path ("workers.slots").
func checkConfigYAML(file string, data []byte, problems *configProblems) map[string]*yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		// At the culprit's line and column, as descriptors' errors.
		if s := yamlvalue.ExplainSyntax(data, err); s.Line > 0 {
			problems.add(nil, "%s:%d:%d: invalid YAML: %s", file, s.Line, s.Column, s.Message)
		} else {
			problems.add(nil, "%s: invalid YAML: %s", file, s.Message)
		}
		return nil
	}
	c := &configChecker{problems: problems, at: map[string]*yaml.Node{}}
	if len(doc.Content) > 0 {
		c.value(doc.Content[0], reflect.TypeFor[node.Config](), "")
	}
	return c.at
}

func (c *configChecker) value(n *yaml.Node, t reflect.Type, path string) {
	if c.visits++; c.visits > maxConfigVisits {
		return
	}
	n = yamlvalue.Resolve(n)
	if n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	if path != "" {
		c.at[path] = n
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		c.duration(n, path)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			c.problems.bad(n, path, "must be a mapping, got %s", kindName(n))
			return
		}
		c.fields(n, t, path)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			c.problems.bad(n, path, "must be a mapping, got %s", kindName(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, _ := yamlvalue.KeyString(n.Content[i])
			c.value(n.Content[i+1], t.Elem(), path+"."+k)
		}
	case reflect.Slice:
		switch n.Kind {
		case yaml.SequenceNode:
			for i, item := range n.Content {
				c.value(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
			}
		case yaml.ScalarNode:
			c.value(n, t.Elem(), path) // one value for a list of one
		default:
			c.problems.bad(n, path, "must be a list, got %s", kindName(n))
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			c.problems.bad(n, path, "must be text, got %s", kindName(n))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind != yaml.ScalarNode {
			c.problems.bad(n, path, "must be a whole number, got %s", kindName(n))
		} else if _, err := strconv.ParseInt(n.Value, 0, 64); err != nil {
			c.problems.bad(n, path, "%q is not a whole number", clipValue(n.Value))
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode {
			c.problems.bad(n, path, "must be true or false, got %s", kindName(n))
		} else if _, err := strconv.ParseBool(n.Value); err != nil {
			c.problems.bad(n, path, "%q is not true or false", clipValue(n.Value))
		}
	case reflect.Float32, reflect.Float64:
		if n.Kind != yaml.ScalarNode {
			c.problems.bad(n, path, "must be a number, got %s", kindName(n))
		} else if _, err := strconv.ParseFloat(n.Value, 64); err != nil {
			c.problems.bad(n, path, "%q is not a number", clipValue(n.Value))
		}
	}
}

// duration checks a time.Duration value: text such as 30s, or 0. A bare
// number other than 0 would be read as nanoseconds.
func (c *configChecker) duration(n *yaml.Node, path string) {
	if n.Kind != yaml.ScalarNode {
		c.problems.bad(n, path, "must be a duration (e.g. 5s, 1m30s), got %s", kindName(n))
		return
	}
	if i, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
		if i != 0 {
			c.problems.bad(n, path, "%s is not a duration: give its unit (e.g. %ss)", n.Value, n.Value)
		}
		return
	}
	if _, err := time.ParseDuration(n.Value); err != nil {
		// Go's durations have no day: "7d" is a likely mistake.
		if days, ok := strings.CutSuffix(n.Value, "d"); ok {
			if d, err := strconv.ParseUint(days, 10, 16); err == nil {
				c.problems.bad(n, path, "%q is not a duration: write days in hours (%dh)", n.Value, d*24)
				return
			}
		}
		c.problems.bad(n, path, "%q is not a duration (e.g. 5s, 1m30s)", clipValue(n.Value))
	}
}

// configKey is the key of field f in manent-server.yaml (its mapstructure
// name, lower case, as viper reads keys); false for a field that is none.
func configKey(f reflect.StructField) (string, bool) {
	name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
	if name == "-" || !f.IsExported() {
		return "", false
	}
	if name == "" {
		name = f.Name
	}
	return strings.ToLower(name), true
}

// fields checks a mapping against the fields of struct t.
func (c *configChecker) fields(n *yaml.Node, t reflect.Type, path string) {
	known := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, ok := configKey(f)
		if !ok {
			continue
		}
		known[name] = f
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if yamlvalue.IsMergeKey(k) {
			v = yamlvalue.Resolve(v)
			if v != nil && v.Kind == yaml.SequenceNode {
				for _, m := range v.Content {
					c.value(m, t, path)
				}
			} else {
				c.value(v, t, path)
			}
			continue
		}
		name, ok := yamlvalue.KeyString(k)
		if !ok {
			c.problems.add(k, "a key must be text")
			continue
		}
		f, ok := known[strings.ToLower(name)]
		if !ok {
			c.problems.add(k, "%s", unknownKey(name, path, known))
			continue
		}
		sub := strings.ToLower(name)
		if path != "" {
			sub = path + "." + sub
		}
		c.value(v, f.Type, sub)
	}
}

func unknownKey(name, path string, known map[string]reflect.StructField) string {
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	slices.Sort(names)
	msg := fmt.Sprintf("unknown key %q", clipValue(name))
	if path != "" {
		msg += " in " + path
	}
	if s := suggest.Closest(name, names); s != "" {
		return msg + fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg + "; known keys: " + strings.Join(names, ", ")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", clipValue(n.Value))
}

func clipValue(s string) string { return manent.ClipText(s, 64) }

// checkValues checks the values of the merged configuration (file,
// environment, flags) that decoding cannot: listen is host:port, the
// counts are at least 1. Each problem is placed where the value came from.
func checkValues(c *node.Config, src func(key string) (*yaml.Node, string), problems *configProblems) {
	bad := func(key, format string, args ...any) {
		if problems.keys[key] {
			return // its text was wrong: said already
		}
		n, prefix := src(key)
		problems.bad(n, prefix, format, args...)
	}
	if _, port, err := net.SplitHostPort(c.Listen); err != nil || port == "" {
		bad("listen", "%q is not host:port (e.g. 127.0.0.1:17103 or :17103)", clipValue(c.Listen))
	}
	if c.Workers.Slots < 1 {
		bad("workers.slots", "must be at least 1")
	}
	// A heartbeat or dead_after of 0 would be the engine's default while
	// the other is checked against it: heartbeat: 0 and dead_after: 1s
	// ran a worker beating every 5s, declared dead every second.
	if c.Workers.Heartbeat <= 0 {
		bad("workers.heartbeat", "must be more than 0 (default %s)", engine.DefaultHeartbeat)
	}
	if c.Workers.DeadAfter <= 0 {
		bad("workers.dead_after", "must be more than 0 (default %s)", engine.DefaultDeadAfter)
	}
	if c.Workers.ForgetAfter <= 0 {
		bad("workers.forget_after", "must be more than 0 (default %s)", engine.DefaultForgetAfter)
	}
	if c.Workers.Heartbeat > 0 && c.Workers.DeadAfter > 0 && c.Workers.DeadAfter < 3*c.Workers.Heartbeat {
		bad("workers.dead_after", "%s must be at least three workers.heartbeat (%s)", c.Workers.DeadAfter, 3*c.Workers.Heartbeat)
	}
	if c.Plugins.Local.MaxZipEntries < 1 {
		bad("plugins.local.max_zip_entries", "must be at least 1 (default %d)", local.DefaultMaxZipEntries)
	}
	if d := c.Plugins.ValidateTimeout; d <= 0 || d > external.MaxValidateTimeout {
		bad("plugins.validate_timeout", "must be more than 0 and at most %s: a submission waits this long for an external plugin's validate (default %s)", external.MaxValidateTimeout, external.ValidateTimeout)
	}
	if c.Limits.Connections < 1 {
		bad("limits.connections", "must be at least 1 (default %d)", DefaultConnections)
	}
	if c.Limits.StreamsPerIdentity < 1 {
		bad("limits.streams_per_identity", "must be at least 1 (default %d)", server.DefaultStreamsPerIdentity)
	}
	if c.Limits.Streams < 1 {
		bad("limits.streams", "must be at least 1 (default %d)", server.DefaultStreams)
	}
	if c.Limits.RefusalsPerMinute < 1 {
		bad("limits.refusals_per_minute", "must be at least 1 (default %d)", server.DefaultRefusalsPerMinute)
	}
	if c.Limits.SignInsPerMinute < 1 {
		bad("limits.sign_ins_per_minute", "must be at least 1 (default %d)", web.DefaultSignInsPerMinute)
	}
	if _, err := budget.ParseProxies(c.TrustedProxies); err != nil {
		bad("trusted_proxies", "%v", err)
	}
	if c.Limits.BearerFailuresPerMinute < 1 {
		bad("limits.bearer_failures_per_minute", "must be at least 1 (default %d)", server.DefaultBearerFailuresPerMinute)
	}
	if err := web.CheckPathPrefix(c.Web.PathPrefix); err != nil {
		bad("web.path_prefix", "%q %s: the path the reverse proxy mounts the UI under, e.g. /manent", clipValue(c.Web.PathPrefix), err)
	}
	checkRetention(c, bad)
	// auth and rbac, each mistake at its place with the others: node.Open
	// reported them later, one section at a time and placed nowhere
	// ("invalid auth configuration: auth.tokens[0].sha256: …").
	_, err := auth.New(auth.Config{Tokens: c.Auth.Tokens, OIDC: c.Auth.OIDC})
	placeFields(err, src, problems)
	_, err = auth.NewPolicy(c.RBAC)
	placeFields(err, src, problems)
	if _, ps := c.ParseKubeconfigs(); len(ps) > 0 {
		for _, p := range ps {
			bad(fmt.Sprintf("plugins.kubernetes.kubeconfigs[%d]", p.Index), "%s", p.Message)
		}
	}
	if c.ShutdownDelay < 0 || c.ShutdownDelay > maxShutdownDelay {
		bad("shutdown_delay", "must be between 0s and %s (the time load balancers take to stop sending requests, e.g. 10s)", maxShutdownDelay)
	}
	// newLogger would read a level slog does not know as info: a
	// "log_level: verbose" meant to show more would show nothing more.
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		bad("log_level", "%q is not a log level: debug, info, warn or error", clipValue(c.LogLevel))
	}
}

// placeFields records each field mistake of err, a *manent.Error, at the
// place of its key (or of the nearest key holding it) with the problems.
func placeFields(err error, src func(key string) (*yaml.Node, string), problems *configProblems) {
	var me *manent.Error
	if !errors.As(err, &me) {
		return
	}
	for _, f := range me.Fields {
		if saidAlready(problems, f.Path) {
			continue
		}
		n, _ := src(f.Path)
		for p := parentPath(f.Path); n == nil && p != ""; p = parentPath(p) {
			n, _ = src(p)
		}
		problems.bad(n, f.Path, "%s", f.Message)
	}
}

// checkSetup places the mistakes node.CheckSetup finds — environments.*,
// governance, artifacts.sources, plugins.steps — with the others: they
// were reported when the node opened, after the rest, one section at a
// time and placed nowhere. The paths of c are resolved already.
func checkSetup(c *node.Config, plugins node.Registrar, src func(key string) (*yaml.Node, string), problems *configProblems) *node.Setup {
	s, err := node.CheckSetup(c, plugins)
	placeFields(err, src, problems)
	return s
}

// parentPath is the key path holding path: "rbac[0]" of
// "rbac[0].subjects", "rbac" of "rbac[0]", "" at the top.
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

// saidAlready reports whether path, or a key holding it, has a problem
// already (a value of the wrong kind, decoded as nothing).
func saidAlready(problems *configProblems, path string) bool {
	for p := path; p != ""; p = parentPath(p) {
		if problems.keys[p] {
			return true
		}
	}
	return false
}

// maxShutdownDelay bounds shutdown_delay: a supervisor kills a server that
// takes longer to stop (Kubernetes' terminationGracePeriodSeconds).
const maxShutdownDelay = 5 * time.Minute

// checkConfigEnv checks the values of the MANENT_* variables viper reads
// (those of keys in read, as viper.AllKeys lists them), each named by its
// variable: MANENT_WORKERS_SLOTS: "four" is not a whole number; a list of
// strings is given comma-separated (MANENT_PLUGINS_PASS_ENV=AWS_REGION,TZ).
//
// A variable of a key viper would not read — one with no default, not in
// the file: viper's AutomaticEnv sees only the keys it knows — is bound
// (bind) when the key is one value or a list of strings (comma-separated),
// so that every key is a MANENT_* variable, as operations.md says (a list's
// items trimmed of spaces); a key
// that is a mapping or a list of mappings cannot be one string, and its
// variable is refused, saying to write the key in the file. Both were
// silently ignored.
func checkConfigEnv(read []string, bind func(key string) error, set func(key string, value any), problems *configProblems) {
	c := &configChecker{problems: problems, at: map[string]*yaml.Node{}}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() == reflect.Struct && t != durationType {
			for i := range t.NumField() {
				f := t.Field(i)
				sub, ok := configKey(f)
				if !ok {
					continue
				}
				if path != "" {
					sub = path + "." + sub
				}
				walk(f.Type, sub)
			}
			return
		}
		v := os.Getenv(envName(path))
		if v == "" {
			return
		}
		list := t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String
		if !slices.Contains(read, path) {
			if t.Kind() == reflect.Map || t.Kind() == reflect.Interface || t.Kind() == reflect.Slice && !list {
				problems.bad(nil, envName(path), "%s cannot be given as an environment variable (it holds mappings): write it in the configuration file", path)
				return
			}
			if err := bind(path); err != nil {
				problems.bad(nil, envName(path), "%v", err)
				return
			}
		}
		if list {
			seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			var items []string
			for _, item := range strings.Split(v, ",") {
				item = strings.TrimSpace(item)
				items = append(items, item)
				seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: item})
			}
			set(path, items) // "A, B" is [A B], not [A " B"]
			c.value(seq, t, envName(path))
			if problems.keys[envName(path)] {
				problems.keys[path] = true
			}
			return
		}
		c.value(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}, t, envName(path))
		if problems.keys[envName(path)] {
			problems.keys[path] = true
		}
	}
	walk(reflect.TypeFor[node.Config](), "")
}

// checkRetention checks the retention.* keys (docs/operations.md): a
// negative age kept everything without a word, a retention.every of 0 or
// below a second ran retention every second, and retention.deploys below
// retention.workflows was refused without saying where.
func checkRetention(c *node.Config, bad func(key, format string, args ...any)) {
	r := c.Retention
	for _, k := range []struct {
		key string
		d   time.Duration
	}{{"retention.workflows", r.Workflows}, {"retention.logs", r.Logs}, {"retention.deploys", r.Deploys}} {
		if k.d < 0 {
			bad(k.key, "must not be negative (0 keeps them for ever)")
		}
	}
	const every = "default 10m0s"
	switch {
	case r.Every <= 0:
		bad("retention.every", "must be more than 0 (%s)", every)
	case r.Every < time.Second:
		bad("retention.every", "%s is shorter than the scheduler's second: give 1s or more (%s)", r.Every, every)
	}
	switch {
	case r.Deploys <= 0:
	case r.Workflows == 0:
		bad("retention.deploys", "needs retention.workflows, which is 0 (DBOS rows kept for ever): a deploy's DBOS workflows are deleted before it")
	case r.Workflows > 0 && r.Deploys < r.Workflows:
		bad("retention.deploys", "%s must be at least retention.workflows (%s): a deploy's DBOS workflows are deleted before it", r.Deploys, r.Workflows)
	case r.Deploys < store.IdempotencyWindow:
		bad("retention.deploys", "%s must be at least %s: an Idempotency-Key's first answer names its deploy for %[2]s",
			r.Deploys, strings.TrimSuffix(store.IdempotencyWindow.String(), "0m0s"))
	}
}

// otherVariables are the MANENT_* variables manent reads that are no key of
// manent-server.yaml: the bootstrap token, the CLI's, and what a step is
// given (SPEC §6, §11.6).
var otherVariables = []string{
	"MANENT_BOOTSTRAP_TOKEN", "MANENT_SERVER", "MANENT_TOKEN", "MANENT_CONTEXT",
	"MANENT_REQUEST_TIMEOUT", "MANENT_FOLLOW_GRACE", "MANENT_FORCE_TTY",
	"MANENT_DEPLOY_ID", "MANENT_APPLICATION", "MANENT_ENVIRONMENT", "MANENT_VERSION",
	"MANENT_ARTIFACT", "MANENT_STEP", "MANENT_ACTION", "MANENT_WORKDIR", "MANENT_CLUSTER",
	"MANENT_ROLLOUT_WAVE", "MANENT_ROLLOUT_TARGETS", "MANENT_ROLLOUT_PERCENT",
}

// warnStrayVariables logs strayVariables of the process's environment:
// serve and the admin tasks that read the configuration.
func warnStrayVariables(log *slog.Logger, c *node.Config) {
	for _, w := range strayVariables(c, os.Environ()) {
		log.Warn(w)
	}
}

// strayVariables says, for each MANENT_* variable of environ that is no
// key's variable but nearly one (MANENT_WORKER_SLOTS for
// MANENT_WORKERS_SLOTS), that it is ignored: viper reads the keys'
// variables only, so a mistyped one was left out without a word. The
// variables c names (callbacks.secret_env, itsm.token_env,
// plugins.pass_env) and otherVariables are not looked at; names are
// compared without their MANENT_ prefix, so that short ones are not
// matched by it.
func strayVariables(c *node.Config, environ []string) []string {
	var keys []string
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == durationType {
			keys = append(keys, strings.TrimPrefix(envName(path), "MANENT_"))
			return
		}
		for i := range t.NumField() {
			if sub, ok := configKey(t.Field(i)); ok {
				if path != "" {
					sub = path + "." + sub
				}
				walk(t.Field(i).Type, sub)
			}
		}
	}
	walk(reflect.TypeFor[node.Config](), "")
	skip := append(slices.Clone(otherVariables), c.Callbacks.SecretEnv, c.ITSM.TokenEnv)
	skip = append(skip, c.Plugins.PassEnv...)
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(name, "MANENT_")
		if !ok || slices.Contains(keys, rest) || slices.Contains(skip, name) {
			continue
		}
		if s := suggest.Closest(rest, keys); s != "" {
			out = append(out, fmt.Sprintf("%s is no variable of manent-server: it is ignored (did you mean MANENT_%s?)", name, s))
		}
	}
	slices.Sort(out)
	return out
}

// missingPluginDirs says, for each directory of plugins.path that does not
// exist, that its plugins are not found: it was skipped without a word,
// and a mistyped directory came to light only when a deploy naming one of
// its plugins was refused as an unknown plugin. It is a warning, not a
// mistake: a directory mounted after the server starts (a volume, a
// package installed later in a fleet's upgrade) is searched at the next
// start. from names where each entry was set, as loadConfigFrom says.
func missingPluginDirs(c *node.Config, from func(key string) string) []string {
	var out []string
	for i, dir := range c.Plugins.Path {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		where := from("plugins.path") // a variable, or one value for the list
		if os.Getenv(envName("plugins.path")) == "" {
			where = cmp.Or(from(fmt.Sprintf("plugins.path[%d]", i)), where)
		}
		if where == "" {
			where = "plugins.path"
		}
		out = append(out, fmt.Sprintf("plugins.path directory %s does not exist (%s): no external plugin is found there, and a deploy naming one of its plugins is refused as an unknown plugin; plugins are looked for at start only, so restart the server once the directory is there", dir, where))
	}
	return out
}
