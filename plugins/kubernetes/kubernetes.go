// Package kubernetes is the `kubernetes` target plugin (SPEC §6): it
// server-side applies the Kubernetes manifests shipped in the artifact,
// with the version substituted and every object labelled for manent, and
// rolls back by re-applying what was live before.
//
//	target:
//	  plugin: kubernetes
//	  with:
//	    kubeconfig: /etc/manent/kube/prod.yaml  # optional: else in-cluster, else $KUBECONFIG
//	    context: prod-eu-1                      # optional
//	    namespace: billing                      # default "default"
//	    manifests: k8s/                         # inside the artifact (default "."): a directory or a file
//	    image: registry.example/billing         # optional: these images get :<version>
//	    wait: true                              # activation waits for readiness
//	    timeout: 5m                             # … this long
//	    cluster: prod-eu-1                      # optional: the agent's cluster name, for the health gate
//
// Actions:
//   - deploy reads the manifests from the artifact (a .tar.gz, .tgz or .tar
//     holding them, or a single YAML file), substitutes ${MANENT_VERSION},
//     ${MANENT_DEPLOY_ID}, ${MANENT_APPLICATION} and ${MANENT_ENVIRONMENT},
//     sets the image, labels every object and the pod templates of
//     Deployments, StatefulSets and DaemonSets with manent.io/application,
//     manent.io/environment, manent.io/deploy-id and manent.io/version, writes
//     the result to the work directory and applies each object (server-side
//     apply, field manager "manent", forced);
//   - live (the checkpoint) returns the objects the manifests name as the
//     cluster has them now, or absent;
//   - activate waits until every workload of the deploy is kstatus Current,
//     failing early — naming up to five pods — when one reports failure or a
//     pod of the deploy has a failing container (SPEC §9);
//   - health is the same check, read once;
//   - rollback:deploy re-applies the checkpointed objects — but for a
//     replica count another field manager alone owns now, which stays as
//     it set it and is named (fields.go) — and deletes the ones that were
//     absent and carry this deploy's id; rollback:activation
//     has nothing to undo (activation only waited).
//
// Readiness is read from the API server with the agent's reader
// (agent.Collect) and judged with clusterstate.Decide, the rules the
// agent-based cluster-ready step uses.
//
// Rollout (SPEC §11.6, canary.go): a wave of rollout.percentages below
// 100 applies only a "<name>-canary" copy of each Deployment, with
// ceil(percent × replicas / 100) replicas and the label manent.io/track:
// canary; stable and every other object wait for the 100 % wave, which
// applies them and removes the canaries. live records the objects the wave
// touches, so rollback:deploy of a canary wave removes the canary and
// leaves stable untouched. The health gate between waves waits for the
// wave's workloads: on the agent's reports (the cluster-ready wait, with
// its "no report since" notice) when with.cluster names the agent's
// cluster, else on the API server.
//
// It imports pkg/plugin, pkg/clusterstate, pkg/agent and
// plugins/clusterready (its wait's parameters), and client-go.
package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/clusterready"
)

// Defaults of `with`.
const (
	DefaultNamespace    = "default"
	DefaultManifests    = "."
	DefaultTimeout      = 5 * time.Minute
	DefaultPollInterval = 2 * time.Second
)

// Options configure the plugin.
type Options struct {
	// RESTConfig returns the client configuration for a target's
	// kubeconfig and context (default: RESTConfig).
	RESTConfig func(kubeconfig, context string) (*rest.Config, error)
	// PollInterval is how often activation reads the cluster while it
	// waits (default 2 s).
	PollInterval time.Duration
	// ClusterReady waits on the agent's reports (the cluster-ready
	// plugin); the health gate of a target with with.cluster needs it.
	ClusterReady ClusterReady
	// Kubeconfigs lists the kubeconfig files a target may name in
	// with.kubeconfig (plugins.kubernetes.kubeconfigs, SPEC §11.1): a
	// kubeconfig can run commands (exec credentials) and read files
	// (tokenFile) as the server, so a descriptor may not pick any file.
	// nil allows any file (local trial mode); an empty list allows none.
	Kubeconfigs []Kubeconfig
}

// Kubeconfig is one file of plugins.kubernetes.kubeconfigs and the
// environments whose deploys may name it.
type Kubeconfig struct {
	// Path is the file, absolute.
	Path string
	// Environments are the environment names or path.Match patterns
	// ("prod", "prod-*") that may name the file; none: every environment.
	Environments []string
}

// ClusterReady waits for a deploy's workloads as the agent reports them
// (*clusterready.Plugin).
type ClusterReady interface {
	AwaitReady(ctx context.Context, pc plugin.Context, a clusterready.Await) (plugin.Result, error)
}

// Plugin is the kubernetes target. It holds no state between actions.
type Plugin struct {
	restConfig  func(kubeconfig, context string) (*rest.Config, error)
	every       time.Duration
	ready       ClusterReady
	kubeconfigs []Kubeconfig // nil: any
}

// New returns the kubernetes plugin.
func New(opts Options) *Plugin {
	p := &Plugin{restConfig: opts.RESTConfig, every: opts.PollInterval, ready: opts.ClusterReady}
	if opts.Kubeconfigs != nil {
		p.kubeconfigs = []Kubeconfig{}
		for _, k := range opts.Kubeconfigs {
			p.kubeconfigs = append(p.kubeconfigs, Kubeconfig{Path: filepath.Clean(k.Path), Environments: slices.Clone(k.Environments)})
		}
	}
	if p.restConfig == nil {
		p.restConfig = RESTConfig
	}
	if p.every <= 0 {
		p.every = DefaultPollInterval
	}
	return p
}

// config is a parsed `with`.
type config struct {
	Kubeconfig, Context, Namespace, Manifests, Image string
	Wait                                             bool
	Timeout                                          time.Duration
	// Cluster is the agent's name of the cluster (health gate).
	Cluster string
}

func parse(with map[string]any) (config, error) {
	c := config{Namespace: DefaultNamespace, Manifests: DefaultManifests, Wait: true, Timeout: DefaultTimeout}
	s := plugin.ReadSettings(with, "kubeconfig", "context", "namespace", "manifests", "image", "wait", "timeout", "cluster")
	str := func(key string, dst *string) bool {
		var v string
		if !s.String(key, &v) {
			return false
		}
		if strings.TrimSpace(v) == "" {
			s.Fail(plugin.SettingPath(key), "with.%s must not be empty", key)
			return false
		}
		*dst = v
		return true
	}
	str("kubeconfig", &c.Kubeconfig)
	str("context", &c.Context)
	if str("cluster", &c.Cluster) && !clusterstate.ValidClusterName(c.Cluster) {
		s.Fail("cluster", "with.cluster %q must name a cluster as its agent reports it (lower-case letters, digits, '-' and '.')", c.Cluster)
	}
	if str("namespace", &c.Namespace) {
		if bad := validation.IsDNS1123Label(c.Namespace); len(bad) > 0 {
			s.Fail("namespace", "with.namespace %q is not a namespace name: %s", c.Namespace, strings.Join(bad, "; "))
		}
	}
	if str("manifests", &c.Manifests) {
		m := filepath.ToSlash(c.Manifests)
		if strings.HasPrefix(m, "/") || slices.Contains(strings.Split(m, "/"), "..") {
			s.Fail("manifests", "with.manifests %q must be a relative path inside the artifact", c.Manifests)
		}
	}
	if str("image", &c.Image) {
		last := c.Image[strings.LastIndexByte(c.Image, '/')+1:]
		if strings.ContainsAny(last, ":@") || strings.ContainsAny(c.Image, " \t") {
			s.Fail("image", "with.image %q must be a repository without tag or digest (e.g. registry.example/billing)", c.Image)
		}
	}
	s.Bool("wait", &c.Wait)
	s.Duration("timeout", &c.Timeout)
	if err := s.Err(); err != nil {
		return c, fmt.Errorf("kubernetes: %w", err)
	}
	return c, nil
}

// Validate checks `with`: known keys, a kubeconfig this server allows, a
// namespace name, a relative manifests path, an image repository without
// tag, a positive timeout.
func (p *Plugin) Validate(with map[string]any) error {
	c, err := parse(with)
	if err != nil {
		return err
	}
	return p.checkKubeconfig(c)
}

// checkKubeconfig refuses a with.kubeconfig that is not one of the
// server's plugins.kubernetes.kubeconfigs. When some file is kept to some
// environments the message lists none: a submitter of one environment is
// not told the file names of another's clusters.
func (p *Plugin) checkKubeconfig(c config) error {
	if c.Kubeconfig == "" || p.kubeconfigs == nil {
		return nil
	}
	if _, ok := p.listed(c.Kubeconfig); ok {
		return nil
	}
	if len(p.kubeconfigs) == 0 {
		return plugin.Settingf("kubeconfig", "target.with.kubeconfig %q is not allowed: this server allows no kubeconfig file (plugins.kubernetes.kubeconfigs is empty; without with.kubeconfig the in-cluster configuration or the server's own kubeconfig is used)", c.Kubeconfig)
	}
	paths := make([]string, len(p.kubeconfigs))
	for i, k := range p.kubeconfigs {
		if len(k.Environments) > 0 {
			return plugin.Settingf("kubeconfig", "target.with.kubeconfig %q is not one of this server's kubeconfig files (plugins.kubernetes.kubeconfigs): ask its operators which file this environment deploys with, or leave with.kubeconfig to the environment configuration", c.Kubeconfig)
		}
		paths[i] = k.Path
	}
	return plugin.Settingf("kubeconfig", "target.with.kubeconfig %q is not one of this server's kubeconfig files (plugins.kubernetes.kubeconfigs: %s)", c.Kubeconfig, strings.Join(paths, ", "))
}

// listed returns the entry of plugins.kubernetes.kubeconfigs for file.
func (p *Plugin) listed(file string) (Kubeconfig, bool) {
	if !filepath.IsAbs(file) {
		return Kubeconfig{}, false
	}
	i := slices.IndexFunc(p.kubeconfigs, func(k Kubeconfig) bool { return k.Path == filepath.Clean(file) })
	if i < 0 {
		return Kubeconfig{}, false
	}
	return p.kubeconfigs[i], true
}

// CheckEnvironment refuses (plugin.EnvironmentCheck) a with.kubeconfig
// that plugins.kubernetes.kubeconfigs keeps to other environments: a
// submitter allowed to deploy to billing/dev must not apply manifests with
// the production cluster's kubeconfig. A file the environment
// configuration names itself (envWith) is the operator's choice for that
// environment. The message names the environments the file is for, never
// the other files.
func (p *Plugin) CheckEnvironment(environment string, with, envWith map[string]any) error {
	c, err := parse(with)
	if err != nil || c.Kubeconfig == "" || p.kubeconfigs == nil {
		return nil // Validate says what is wrong
	}
	k, ok := p.listed(c.Kubeconfig)
	if !ok || len(k.Environments) == 0 || MayUse(k.Environments, environment) {
		return nil
	}
	if e, ok := envWith["kubeconfig"].(string); ok && filepath.IsAbs(e) && filepath.Clean(e) == k.Path {
		return nil
	}
	return plugin.Settingf("kubeconfig", "target.with.kubeconfig %q is kept to environments %s by this server's plugins.kubernetes.kubeconfigs, not %s: leave with.kubeconfig to %s's environment configuration, or ask the operators to add %s to the file's environments",
		c.Kubeconfig, strings.Join(k.Environments, ", "), environment, environment, environment)
}

// MayUse says whether environment matches one of patterns (names or
// path.Match patterns such as "prod-*").
func MayUse(patterns []string, environment string) bool {
	for _, pat := range patterns {
		if ok, err := path.Match(pat, environment); err == nil && ok {
			return true
		}
	}
	return false
}

func logOf(pc plugin.Context) io.Writer {
	if pc.Log == nil {
		return io.Discard
	}
	return pc.Log
}

// load parses `with` and renders the manifests of the deploy's artifact.
func load(pc plugin.Context) (config, []*unstructured.Unstructured, error) {
	c, err := parse(pc.With)
	if err != nil {
		return c, nil, plugin.Permanent(err)
	}
	if pc.Artifact == "" {
		return c, nil, plugin.Permanent(fmt.Errorf("kubernetes: no artifact was downloaded"))
	}
	files, single, err := readManifests(pc.Artifact, c.Manifests)
	if err != nil {
		return c, nil, fmt.Errorf("kubernetes: %w", err)
	}
	if single && cleanInside(c.Manifests) != "." {
		fmt.Fprintf(logOf(pc), "the artifact is a single manifest file: with.manifests %q does not apply\n", c.Manifests)
	}
	objs, err := render(files, varsOf(pc, c.Image))
	if err != nil {
		return c, nil, fmt.Errorf("kubernetes: %w", err)
	}
	return c, objs, nil
}

// HonoursPercentages: the plugin deploys a percentage as a canary.
func (p *Plugin) HonoursPercentages(with map[string]any) error {
	_, err := parse(with)
	return err
}

// loadWave is load, then the objects of pc's wave (forWave).
func loadWave(pc plugin.Context) (config, waveObjects, error) {
	c, objs, err := load(pc)
	if err != nil {
		return c, waveObjects{}, err
	}
	w, err := forWave(pc, objs)
	return c, w, err
}

// Deploy renders the manifests into the work directory and applies them;
// in a canary wave only the canaries, in the 100 % wave everything, then
// it removes the canaries.
func (p *Plugin) Deploy(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	c, wave, err := loadWave(pc)
	if err != nil {
		return nil, err
	}
	objs := wave.apply
	log := logOf(pc)
	if canaryWave(pc) {
		if len(objs) == 0 {
			fmt.Fprintf(log, "no Deployment to run a %d %% canary of: this wave changes nothing\n", pc.Percent)
		}
		if len(wave.held) > 0 {
			fmt.Fprintf(log, "left for the 100 %% wave: %s\n", refList(wave.held))
		}
	}
	rendered, err := writeRendered(pc, objs)
	if err != nil {
		return nil, err
	}
	cl, err := p.connect(c)
	if err != nil {
		return nil, err
	}
	refs := make([]Ref, 0, len(objs))
	var imgs []string
	crdApplied := false
	for _, u := range objs {
		var ri dynamic.ResourceInterface
		if crdApplied { // the kind may be one the CRD just applied defines
			ri, err = cl.resourceWaiting(ctx, u, c.Namespace)
		} else {
			ri, err = cl.resource(u, c.Namespace)
		}
		if err != nil {
			return nil, classify(fmt.Errorf("kubernetes: %w", err))
		}
		if err := apply(ctx, ri, u); err != nil {
			return nil, fmt.Errorf("kubernetes: %w", err)
		}
		crdApplied = crdApplied || applyRank(u) == 1
		refs = append(refs, refOf(u))
		imgs = append(imgs, images(u)...)
		fmt.Fprintf(log, "applied %s\n", refOf(u))
	}
	slices.Sort(imgs)
	res := plugin.Result{"namespace": c.Namespace, "manifests": rendered, "applied": refs, "images": slices.Compact(imgs)}
	if canaryWave(pc) {
		res["canary_percent"], res["held"] = pc.Percent, wave.held
	}
	if len(wave.canaries) > 0 {
		removed, err := removeCanaries(ctx, cl, c, wave.canaries)
		if err != nil {
			return nil, err
		}
		for _, r := range removed {
			fmt.Fprintf(log, "removed canary %s\n", r)
		}
		res["canaries_removed"] = removed
	}
	return res, nil
}

func refList(refs []Ref) string {
	s := make([]string, len(refs))
	for i, r := range refs {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}

// writeRendered writes the rendered manifests to
// <workdir>/kubernetes/<step>.yaml and returns the path.
func writeRendered(pc plugin.Context, objs []*unstructured.Unstructured) (string, error) {
	if pc.WorkDir == "" {
		return "", plugin.Permanent(fmt.Errorf("kubernetes: no work directory"))
	}
	data, err := marshalManifests(objs)
	if err != nil {
		return "", plugin.Permanent(fmt.Errorf("kubernetes: %w", err))
	}
	dir := filepath.Join(pc.WorkDir, "kubernetes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kubernetes: %w", err)
	}
	step := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, pc.Step)
	if step == "" || strings.Trim(step, ".") == "" {
		step = "deploy"
	}
	dst := filepath.Join(dir, step+".yaml")
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return "", fmt.Errorf("kubernetes: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", fmt.Errorf("kubernetes: %w", err)
	}
	return dst, nil
}

// Checkpoint is what live reports and the rollbacks return to: every
// object the deploy's manifests name, as it was in the cluster.
type Checkpoint struct {
	Objects []LiveObject `json:"objects"`
}

// LiveObject is one object of a checkpoint: absent, or as the cluster had
// it without status and server-set metadata. A Secret's content is never
// recorded (checkpoints are logged and stored): Secret is true instead and
// a rollback leaves the Secret as it is.
type LiveObject struct {
	Ref
	Absent bool           `json:"absent,omitempty"`
	Secret bool           `json:"secret,omitempty"`
	Object map[string]any `json:"object,omitempty"`
	// ReplicasSetOutside says spec.replicas was not manent's when the
	// checkpoint was taken: another field manager owned it, or none did —
	// defaulted, or set through the scale subresource (kubectl scale, an
	// autoscaler), which records no manager when none owned the field
	// before. A rollback then leaves the count as it is now when no one
	// owns it either (withoutForeignFields).
	ReplicasSetOutside bool `json:"replicas_set_outside,omitempty"`
}

// Live returns, for each object the manifests name, the object as the
// cluster has it now, or that it is absent.
func (p *Plugin) Live(ctx context.Context, pc plugin.Context) (json.RawMessage, error) {
	c, wave, err := loadWave(pc)
	if err != nil {
		return nil, err
	}
	// The objects the wave changes: the canaries of a canary wave (stable
	// is not recorded, so a rollback leaves it untouched); everything and
	// the canaries it removes in the 100 % wave.
	objs := append(slices.Clone(wave.apply), wave.canaries...)
	cl, err := p.connect(c)
	if err != nil {
		return nil, err
	}
	cp := Checkpoint{Objects: make([]LiveObject, 0, len(objs))}
	for _, u := range objs {
		ri, err := cl.resource(u, c.Namespace)
		if meta.IsNoMatchError(err) { // the kind does not exist yet, nor any object of it
			cp.Objects = append(cp.Objects, LiveObject{Ref: refOf(u), Absent: true})
			continue
		}
		if err != nil {
			return nil, classify(fmt.Errorf("kubernetes: %w", err))
		}
		cur, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			cp.Objects = append(cp.Objects, LiveObject{Ref: refOf(u), Absent: true})
		case err != nil:
			return nil, classify(fmt.Errorf("kubernetes: get %s: %w", refOf(u), err))
		case isSecret(u):
			cp.Objects = append(cp.Objects, LiveObject{Ref: refOf(u), Secret: true})
		default:
			_, hasReplicas, _ := unstructured.NestedFieldNoCopy(cur.Object, "spec", "replicas")
			cp.Objects = append(cp.Objects, LiveObject{Ref: refOf(u), Object: strip(cur),
				ReplicasSetOutside: hasReplicas && !replicasOwnedBy(cur, FieldManager)})
		}
	}
	return json.Marshal(cp)
}

func isSecret(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Secret"
}

// strip removes what the server owns from a live object, so that it can
// be applied again: status and server-set metadata.
func strip(u *unstructured.Unstructured) map[string]any {
	obj := u.DeepCopy().Object
	delete(obj, "status")
	for _, f := range []string{"managedFields", "resourceVersion", "uid", "creationTimestamp",
		"generation", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(obj, "metadata", f)
	}
	return obj
}

// appliedRefs returns the objects a deploy applies, with their namespaces
// resolved against the cluster.
func appliedRefs(cl *cluster, c config, objs []*unstructured.Unstructured) ([]Ref, error) {
	refs := make([]Ref, 0, len(objs))
	for _, u := range objs {
		if _, err := cl.resource(u, c.Namespace); err != nil && !meta.IsNoMatchError(err) {
			return nil, classify(fmt.Errorf("kubernetes: %w", err))
		}
		refs = append(refs, refOf(u))
	}
	return refs, nil
}

// Activate waits until the deploy's workloads are ready (with.wait), at
// most with.timeout.
func (p *Plugin) Activate(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	c, wave, err := loadWave(pc)
	if err != nil {
		return nil, err
	}
	objs := wave.apply
	log := logOf(pc)
	if !c.Wait {
		fmt.Fprintf(log, "with.wait is false: not waiting for readiness\n")
		return plugin.Result{"waited": false}, nil
	}
	cl, err := p.connect(c)
	if err != nil {
		return nil, err
	}
	refs, err := appliedRefs(cl, c, objs)
	if err != nil {
		return nil, err
	}
	if ws, _ := workloads(refs); len(ws) == 0 {
		fmt.Fprintf(log, "no Deployment, StatefulSet or DaemonSet to wait for\n")
		return plugin.Result{"waited": true, "workloads": []string{}}, nil
	}
	start := time.Now()
	r, err := p.wait(ctx, cl, pc, refs, c.Timeout)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	fmt.Fprintf(log, "ready: %s\n", strings.Join(r.Workloads, ", "))
	return plugin.Result{"waited": true, "workloads": r.Workloads, "seconds": time.Since(start).Seconds()}, nil
}

// Health reads the deploy's workloads once: healthy when all are ready;
// a failure as Activate has it; a retryable error while they come up.
func (p *Plugin) Health(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	c, wave, err := loadWave(pc)
	if err != nil {
		return nil, err
	}
	objs := wave.apply
	cl, err := p.connect(c)
	if err != nil {
		return nil, err
	}
	refs, err := appliedRefs(cl, c, objs)
	if err != nil {
		return nil, err
	}
	if ws, _ := workloads(refs); len(ws) == 0 {
		return plugin.Result{"workloads": []string{}}, nil
	}
	r, err := cl.check(ctx, pc.DeployID, refs)
	switch {
	case err != nil:
		return nil, fmt.Errorf("kubernetes: %w", err)
	case r.Failed != nil:
		return nil, fmt.Errorf("kubernetes: %w", r.Failed)
	case !r.Ready:
		return nil, fmt.Errorf("kubernetes: not ready: %s", r.Waiting)
	}
	return plugin.Result{"workloads": r.Workloads}, nil
}

// HealthGate is the gate between rollout waves: it waits, at most
// with.timeout, until the workloads the wave changed are ready — on the
// agent's reports when with.cluster names the agent's cluster (the
// cluster-ready wait, which shows "no report from the agent since …" when
// reports stop for 60 s), else on the API server.
func (p *Plugin) HealthGate(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	c, wave, err := loadWave(pc)
	if err != nil {
		return nil, err
	}
	cl, err := p.connect(c)
	if err != nil {
		return nil, err
	}
	refs, err := appliedRefs(cl, c, wave.apply)
	if err != nil {
		return nil, err
	}
	ws, _ := workloads(refs)
	if len(ws) == 0 {
		fmt.Fprintf(logOf(pc), "no Deployment, StatefulSet or DaemonSet in this wave: nothing to wait for\n")
		return plugin.Result{"workloads": []string{}}, nil
	}
	if c.Cluster == "" {
		r, err := p.wait(ctx, cl, pc, refs, c.Timeout)
		if err != nil {
			return nil, fmt.Errorf("kubernetes: %w", err)
		}
		return plugin.Result{"workloads": r.Workloads}, nil
	}
	if p.ready == nil {
		return nil, plugin.Permanent(fmt.Errorf("kubernetes: with.cluster is set but this server has no cluster-ready wait to read the agent's reports"))
	}
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = w.String()
	}
	return p.ready.AwaitReady(ctx, pc, clusterready.Await{Cluster: c.Cluster, Timeout: c.Timeout, Workloads: names})
}

// RollbackDeploy returns the manifests' objects to the checkpoint: each
// recorded object is applied again as it was (forced) — but for a replica
// count another field manager alone owns now (an autoscaler, kubectl scale
// or edit), which stays as it is and is named in the log and in
// left_as_changed when it differs from the checkpoint (fields.go) — and
// each that was absent is deleted if it carries this deploy's
// manent.io/deploy-id.
// Namespaces and CustomResourceDefinitions are never deleted (that would
// delete everything in them), nor Secrets restored (their content is not
// checkpointed).
func (p *Plugin) RollbackDeploy(ctx context.Context, pc plugin.Context, checkpoint json.RawMessage) (plugin.Result, error) {
	c, err := parse(pc.With)
	if err != nil {
		return nil, plugin.Permanent(err)
	}
	var cp Checkpoint
	if len(checkpoint) == 0 || string(checkpoint) == "null" {
		return nil, plugin.Permanent(fmt.Errorf("kubernetes: no checkpoint to return to"))
	}
	if err := json.Unmarshal(checkpoint, &cp); err != nil {
		return nil, plugin.Permanent(fmt.Errorf("kubernetes: bad checkpoint: %w", err))
	}
	cl, err := p.connect(c)
	if err != nil {
		return nil, err
	}
	log := logOf(pc)
	restored, deleted, kept := []Ref{}, []Ref{}, []Ref{}
	changed := []string{} // fields left as another manager set them
	// Restore first (in apply order), then delete what is new (in reverse).
	for _, o := range cp.Objects {
		if o.Absent || o.Secret || o.Object == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: o.Object}
		ri, err := cl.resource(u, c.Namespace)
		if err != nil {
			return nil, classify(fmt.Errorf("kubernetes: %w", err))
		}
		// A replica count another manager alone owns now stays as it set it.
		cur, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err): // deleted since: applied whole
		case err != nil:
			return nil, classify(fmt.Errorf("kubernetes: get %s: %w", refOf(u), err))
		default:
			obj, theirs := withoutForeignFields(o.Object, cur, o.ReplicasSetOutside)
			u = &unstructured.Unstructured{Object: obj}
			for _, f := range theirs {
				changed = append(changed, fmt.Sprintf("%s %s", refOf(u), f))
				fmt.Fprintf(log, "left %s %s as it is: changed since the deploy by another manager, not by manent\n", refOf(u), f)
			}
		}
		if err := apply(ctx, ri, u); err != nil {
			return nil, fmt.Errorf("kubernetes: restore: %w", err)
		}
		restored = append(restored, refOf(u))
		fmt.Fprintf(log, "restored %s\n", refOf(u))
	}
	for i := len(cp.Objects) - 1; i >= 0; i-- {
		o := cp.Objects[i]
		if !o.Absent {
			continue
		}
		gvk := (&unstructured.Unstructured{Object: map[string]any{"apiVersion": o.APIVersion, "kind": o.Kind}}).GroupVersionKind()
		if (gvk.Group == "" && gvk.Kind == "Namespace") || (gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition") {
			kept = append(kept, o.Ref)
			fmt.Fprintf(log, "kept %s: a rollback never deletes a %s\n", o.Ref, gvk.Kind)
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(o.APIVersion)
		u.SetKind(o.Kind)
		u.SetName(o.Name)
		u.SetNamespace(o.Namespace)
		ri, err := cl.resource(u, c.Namespace)
		if meta.IsNoMatchError(err) {
			continue // the kind is gone, and its objects with it
		}
		if err != nil {
			return nil, classify(fmt.Errorf("kubernetes: %w", err))
		}
		ref := refOf(u) // with the namespace resolved
		cur, err := ri.Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, classify(fmt.Errorf("kubernetes: get %s: %w", ref, err))
		}
		if cur.GetLabels()[clusterstate.LabelDeployID] != pc.DeployID {
			kept = append(kept, ref)
			fmt.Fprintf(log, "kept %s: not deployed by %s\n", ref, pc.DeployID)
			continue
		}
		bg := metav1.DeletePropagationBackground
		uid := cur.GetUID()
		err = ri.Delete(ctx, o.Name, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case apierrors.IsConflict(err): // replaced since the read: not this deploy's object any more
			kept = append(kept, ref)
			fmt.Fprintf(log, "kept %s: replaced meanwhile\n", ref)
			continue
		case err != nil:
			return nil, classify(fmt.Errorf("kubernetes: delete %s: %w", ref, err))
		}
		deleted = append(deleted, ref)
		fmt.Fprintf(log, "deleted %s: absent before the deploy\n", ref)
	}
	res := plugin.Result{"restored": restored, "deleted": deleted, "kept": kept}
	if len(changed) > 0 {
		res["left_as_changed"] = changed
	}
	return res, nil
}

// RollbackActivation has nothing to undo: activation only waited for
// readiness. rollback:deploy, which runs next, restores the objects.
func (p *Plugin) RollbackActivation(_ context.Context, pc plugin.Context, _ json.RawMessage) (plugin.Result, error) {
	if _, err := parse(pc.With); err != nil {
		return nil, plugin.Permanent(err)
	}
	fmt.Fprintf(logOf(pc), "activation only waited for readiness: nothing to undo\n")
	return plugin.Result{}, nil
}
