package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/spf13/viper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/manent-io/manent/pkg/kubetest"
	"github.com/manent-io/manent/pkg/node"
)

// helmBin is the helm binary: $MANENT_HELM, else helm on PATH. Without it
// the test is skipped, or fails when MANENT_TEST_REQUIRE_K8S=1 (.ci/run
// installs it).
func helmBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MANENT_HELM"); p != "" {
		return p
	}
	p, err := exec.LookPath("helm")
	if err != nil {
		if os.Getenv(kubetest.RequireEnv) == "1" {
			t.Fatalf("no helm binary (MANENT_HELM or PATH) but %s=1", kubetest.RequireEnv)
		}
		t.Skip("no helm binary: set MANENT_HELM or put helm on PATH")
	}
	return p
}

func helmTemplate(t *testing.T, helm, ns string, set ...string) ([]byte, error) {
	t.Helper()
	args := []string{"template", "m", filepath.Join("helm", "manent"), "--namespace", ns}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(helm, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New(strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func decode(t *testing.T, manifests []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("decode manifests: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

type cluster struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	api := kubetest.Start(t, kubetest.BinDir(t))
	cfg := &rest.Config{Host: api.URL, BearerToken: api.Token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// apply server-side applies obj in ns (unless it names its own), for real
// when real is set, else with dry-run: the API server validates and admits
// it (schema, defaults, RBAC escalation checks) but stores nothing.
func (c *cluster) apply(t *testing.T, obj *unstructured.Unstructured, ns string, real bool) error {
	t.Helper()
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = c.dyn.Resource(m.Resource)
	if m.Scope.Name() == "namespace" {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(ns)
		}
		ri = c.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: "manent-test", Force: new(true)}
	if !real {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Patch(context.Background(), obj.GetName(), types.ApplyPatchType, data, opts)
	return err
}

func (c *cluster) namespace(t *testing.T, name string) {
	t.Helper()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
	if err := c.apply(t, ns, "", true); err != nil {
		t.Fatalf("namespace %s: %v", name, err)
	}
}

func kinds(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	k := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		k[o.GetKind()] = o
	}
	return k
}

// TestHelmChart renders deploy/helm/manent for SQLite, for PostgreSQL with
// three replicas, the agent and an Ingress, and for a namespaced agent, and
// applies each rendering with server-side dry-run; the ConfigMap must decode
// into node.Config with no unknown key and hold no secret.
func TestHelmChart(t *testing.T) {
	helm := helmBin(t)
	c := startCluster(t)
	const ns = "manent"
	c.namespace(t, ns)
	c.namespace(t, "shop")
	const dsn = "postgres://manent:S3CRET@pg:5432/manent"

	cases := []struct {
		name  string
		set   []string
		check func(t *testing.T, k map[string]*unstructured.Unstructured)
	}{
		{"sqlite", nil, func(t *testing.T, k map[string]*unstructured.Unstructured) {
			d := k["Deployment"]
			if r, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "replicas"); fmt.Sprint(r) != "1" {
				t.Errorf("sqlite replicas %v, want 1", r)
			}
			if s, _, _ := unstructured.NestedString(d.Object, "spec", "strategy", "type"); s != "Recreate" {
				t.Errorf("sqlite strategy %q, want Recreate", s)
			}
			if k["PersistentVolumeClaim"] == nil {
				t.Error("sqlite: no PersistentVolumeClaim")
			}
		}},
		{"postgres", []string{"database.type=postgres", "replicas=3", "database.postgres.existingSecret=manent-db",
			"agent.enabled=true", "agent.cluster=prod-eu-1", "agent.tokenSecret=agent-token",
			"ingress.enabled=true", `ingress.annotations.nginx\.ingress\.kubernetes\.io/proxy-body-size=16m`,
			"config.workers.dead_after=45s", "config.retention.logs=720h"},
			func(t *testing.T, k map[string]*unstructured.Unstructured) {
				if k["PersistentVolumeClaim"] != nil {
					t.Error("postgres: a PersistentVolumeClaim")
				}
				if k["ClusterRole"] == nil || k["Ingress"] == nil {
					t.Fatalf("postgres: kinds %v, want a ClusterRole and an Ingress", k)
				}
				// An agent's large report gets past ingress-nginx's 1 MiB default.
				if a := k["Ingress"].GetAnnotations(); a["nginx.ingress.kubernetes.io/proxy-body-size"] != "16m" {
					t.Errorf("Ingress annotations %v, want the proxy-body-size given", a)
				}
			}},
		{"agent-namespaced", []string{"agent.enabled=true", "agent.cluster=c1", "agent.tokenSecret=t", "agent.namespace=shop"},
			func(t *testing.T, k map[string]*unstructured.Unstructured) {
				if k["Role"] == nil || k["ClusterRole"] != nil {
					t.Error("namespaced agent: want a Role, no ClusterRole")
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helmTemplate(t, helm, ns, tc.set...)
			if err != nil {
				t.Fatalf("helm template: %v", err)
			}
			if bytes.Contains(out, []byte("S3CRET")) || bytes.Contains(out, []byte(dsn)) {
				t.Fatal("the rendered chart holds the DSN")
			}
			objs := decode(t, out)
			k := kinds(objs)
			for _, want := range []string{"ConfigMap", "Deployment", "Service", "ServiceAccount"} {
				if k[want] == nil {
					t.Fatalf("no %s rendered", want)
				}
			}
			data, _, _ := unstructured.NestedString(k["ConfigMap"].Object, "data", "manent-server.yaml")
			v := viper.New()
			v.SetConfigType("yaml")
			if err := v.ReadConfig(strings.NewReader(data)); err != nil {
				t.Fatal(err)
			}
			var cfg node.Config
			if err := v.UnmarshalExact(&cfg); err != nil {
				t.Fatalf("ConfigMap is not a manent-server.yaml: %v\n%s", err, data)
			}
			if cfg.Workers.Heartbeat <= 0 || cfg.Workers.DeadAfter <= 0 {
				t.Errorf("workers.heartbeat/dead_after missing: %+v", cfg.Workers)
			}
			tc.check(t, k)
			for _, o := range objs {
				if err := c.apply(t, o, ns, false); err != nil {
					t.Errorf("dry-run apply %s/%s: %v", o.GetKind(), o.GetName(), err)
				}
			}
		})
	}

	for _, bad := range [][]string{
		{"replicas=2"},
		{"database.type=postgres", "replicas=2"},
		{"agent.enabled=true", "agent.tokenSecret=t"},
	} {
		if _, err := helmTemplate(t, helm, ns, bad...); err == nil {
			t.Errorf("helm template %v: rendered, want a refusal", bad)
		}
	}
}

// TestAgentManifests applies the resources deploy/agent/kustomization.yaml
// lists (and secret.example.yaml) with server-side dry-run, after creating
// their namespace for real.
func TestAgentManifests(t *testing.T) {
	c := startCluster(t)
	kz, err := os.ReadFile(filepath.Join("agent", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := utilyaml.Unmarshal(kz, &k); err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range append(k.Resources, "secret.example.yaml") {
		b, err := os.ReadFile(filepath.Join("agent", f))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, decode(t, b)...)
	}
	var deploy *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			if err := c.apply(t, o, "", true); err != nil {
				t.Fatal(err)
			}
		case "Deployment":
			deploy = o
		}
	}
	if deploy == nil {
		t.Fatal("no Deployment in deploy/agent")
	}
	cs, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	cmd, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "command")
	if len(cmd) != 1 || cmd[0] != "/usr/local/bin/manent-agent" {
		t.Errorf("agent command %v, want the image's /usr/local/bin/manent-agent (Dockerfile)", cmd)
	}
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			continue
		}
		if err := c.apply(t, o, "", false); err != nil {
			t.Errorf("dry-run apply %s/%s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// TestPackagingShipsEveryBinary: the release archive, both image builds
// and so the agent's Deployment have every binary of cmd/, manent's
// siblings manent-agent and manent-policy included (`manent agent` and
// `manent policy test` run them from manent's directory).
func TestPackagingShipsEveryBinary(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("..", "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	goreleaser, docker, dockerRelease := read(".goreleaser.yaml"), read("Dockerfile"), read("Dockerfile.goreleaser")
	copyLine := func(dockerfile string) string {
		for _, l := range strings.Split(dockerfile, "\n") {
			if strings.HasPrefix(l, "COPY ") && strings.HasSuffix(l, " /usr/local/bin/") {
				return l
			}
		}
		return ""
	}
	var rel struct {
		Builds []struct {
			ID     string `json:"id"`
			Binary string `json:"binary"`
		} `json:"builds"`
		DockersV2 []struct {
			IDs []string `json:"ids"`
		} `json:"dockers_v2"`
	}
	if err := sigsyaml.Unmarshal([]byte(goreleaser), &rel); err != nil {
		t.Fatal(err)
	}
	if len(rel.DockersV2) != 1 {
		t.Fatalf(".goreleaser.yaml has %d dockers_v2 entries, want the one image", len(rel.DockersV2))
	}
	dockerIDs := rel.DockersV2[0].IDs
	buildOf := map[string]string{} // binary → build id
	for _, b := range rel.Builds {
		buildOf[b.Binary] = b.ID
	}
	var n int
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		bin := e.Name()
		if !strings.Contains(goreleaser, "\n    binary: "+bin+"\n") {
			t.Errorf(".goreleaser.yaml builds no %s", bin)
		}
		if l := copyLine(docker); !strings.Contains(l+" ", "/out/"+bin+" ") {
			t.Errorf("Dockerfile does not copy %s into /usr/local/bin (%q)", bin, l)
		}
		// goreleaser's dockers_v2 context holds each platform's binaries
		// under <os>/<arch>/, which buildx names $TARGETPLATFORM.
		if l := copyLine(dockerRelease); !strings.Contains(l+" ", " $TARGETPLATFORM/"+bin+" ") {
			t.Errorf("Dockerfile.goreleaser does not copy $TARGETPLATFORM/%s into /usr/local/bin (%q)", bin, l)
		}
		if id, ok := buildOf[bin]; !ok || !slices.Contains(dockerIDs, id) {
			t.Errorf(".goreleaser.yaml's image (dockers_v2 ids %v) does not take the build of %s", dockerIDs, bin)
		}
	}
	if n < 4 {
		t.Fatalf("only %d binaries in cmd/", n)
	}
}

// finalStage is a Dockerfile's last stage: its lines from the last FROM
// on, comments and blank lines left out.
func finalStage(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", name))
	if err != nil {
		t.Fatal(err)
	}
	var final []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "FROM ") {
			final = nil
		}
		if l != "" && !strings.HasPrefix(l, "#") {
			final = append(final, l)
		}
	}
	return final
}

// TestDockerfilesShareTheirFinalStage: Dockerfile (built from source) and
// Dockerfile.goreleaser (from goreleaser's binaries) make the same image:
// their final stages are line for line the same but for where the
// binaries are copied from. TestImage builds and runs
// Dockerfile.goreleaser's image; Dockerfile's first stage needs the golang
// image, which the CI machine kind cannot pull, so this is what checks it.
func TestDockerfilesShareTheirFinalStage(t *testing.T) {
	src, rel := finalStage(t, "Dockerfile"), finalStage(t, "Dockerfile.goreleaser")
	// goreleaser's has ARG TARGETPLATFORM, which selects its binaries.
	rel = slices.DeleteFunc(rel, func(l string) bool { return l == "ARG TARGETPLATFORM" })
	if len(src) != len(rel) {
		t.Fatalf("final stages differ:\nDockerfile:\n%s\nDockerfile.goreleaser:\n%s", strings.Join(src, "\n"), strings.Join(rel, "\n"))
	}
	binaries := strings.NewReplacer("/out/", "", "$TARGETPLATFORM/", "", "--from=build ", "")
	for i := range src {
		if src[i] != rel[i] && binaries.Replace(src[i]) != binaries.Replace(rel[i]) {
			t.Errorf("final stages differ at line %d:\nDockerfile:            %s\nDockerfile.goreleaser: %s", i+1, src[i], rel[i])
		}
	}
	if src[0] != "FROM scratch" {
		t.Errorf("Dockerfile's final stage starts %q, want FROM scratch", src[0])
	}
}

// TestGoreleaserConfigMatchesSchema validates .goreleaser.yaml against
// goreleaser's own JSON Schema (testdata/README.md says where it comes
// from): every key known, every value of the right type, as `goreleaser
// check` would parse it, with no goreleaser binary (TestGoreleaserCheck
// runs `goreleaser check` itself when one is given).
func TestGoreleaserConfigMatchesSchema(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "goreleaser-v2.17.0.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("goreleaser.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("goreleaser.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	validate := func(y []byte) error {
		j, err := sigsyaml.YAMLToJSON(y)
		if err != nil {
			return err
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
		if err != nil {
			return err
		}
		return schema.Validate(inst)
	}
	cfg, err := os.ReadFile(filepath.Join("..", ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := validate(cfg); err != nil {
		t.Fatalf(".goreleaser.yaml does not match goreleaser's schema: %v", err)
	}
	// The schema refuses what goreleaser would: an unknown key, a value of
	// the wrong type.
	for _, bad := range []struct{ name, from, to string }{
		{"a misspelt key", "\nbuilds:\n", "\nbuild:\n"},
		{"a string for a list", "goarch: [amd64, arm64]", "goarch: amd64"},
	} {
		mutated := strings.Replace(string(cfg), bad.from, bad.to, 1)
		if mutated == string(cfg) {
			t.Fatalf("%s: %q is not in .goreleaser.yaml", bad.name, bad.from)
		}
		if validate([]byte(mutated)) == nil {
			t.Errorf("%s passes the schema", bad.name)
		}
	}
}
