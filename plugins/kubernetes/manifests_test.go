package kubernetes

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manent-io/manent/pkg/plugin"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// writeArchive packs the files under dir into dst (a .tar, or gzipped when
// gz), each entry named prefix+<relative path>.
func writeArchive(t *testing.T, dir, dst, prefix string, gz bool) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: prefix + filepath.ToSlash(rel) + "/", Mode: 0o755})
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: prefix + filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	if gz {
		data = gzipped(t, data)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var testVars = renderVars{DeployID: "dpl_0123", Application: "billing", Environment: "prod", Version: "1.4.2", Image: "registry.example/billing"}

// TestRenderGolden renders the fixture application (testdata/app) from a
// .tar.gz artifact and compares the manifests with testdata/render.golden
// (go test -run TestRenderGolden -update rewrites it).
func TestRenderGolden(t *testing.T) {
	art := writeArchive(t, "testdata/app", filepath.Join(t.TempDir(), "billing-1.4.2.tar.gz"), "./", true)
	files, single, err := readManifests(art, "k8s/")
	if err != nil || single {
		t.Fatalf("readManifests = %v, single %v", err, single)
	}
	objs, err := render(files, testVars)
	if err != nil {
		t.Fatal(err)
	}
	got, err := marshalManifests(objs)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "render.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("rendered manifests differ from %s (run with -update to accept):\n%s", golden, got)
	}
}

func objectNamed(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	t.Fatalf("no %s %s among %d objects", kind, name, len(objs))
	return nil
}

func TestRenderLabelsImagesAndOrder(t *testing.T) {
	art := writeArchive(t, "testdata/app", filepath.Join(t.TempDir(), "artifact"), "", true)
	files, _, err := readManifests(art, "./k8s")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := render(files, testVars)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, u := range objs {
		order = append(order, u.GetKind()+"/"+u.GetName())
		l := u.GetLabels()
		if l["manent.io/application"] != "billing" || l["manent.io/environment"] != "prod" ||
			l["manent.io/deploy-id"] != "dpl_0123" || l["manent.io/version"] != "1.4.2" {
			t.Errorf("%s %s labels = %v", u.GetKind(), u.GetName(), l)
		}
		if u.GetNamespace() != "" {
			t.Errorf("%s %s namespace = %q, want none before resolution", u.GetKind(), u.GetName(), u.GetNamespace())
		}
	}
	// Namespaces first, then the files in name order, documents in file order.
	want := []string{"Namespace/billing-extra", "ConfigMap/billing-config", "CronJob/billing-report", "Deployment/billing", "Service/billing"}
	if !slices.Equal(order, want) {
		t.Errorf("objects = %v, want %v", order, want)
	}

	d := objectNamed(t, objs, "Deployment", "billing")
	tl, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
	if tl["app"] != "billing" || tl["manent.io/deploy-id"] != "dpl_0123" || tl["manent.io/version"] != "1.4.2" {
		t.Errorf("pod template labels = %v", tl)
	}
	sel, _, _ := unstructured.NestedStringMap(d.Object, "spec", "selector", "matchLabels")
	if len(sel) != 1 || sel["app"] != "billing" {
		t.Errorf("selector = %v, want it untouched", sel)
	}
	if got, want := images(d), []string{"registry.example/billing:1.4.2", "registry.example/billing:1.4.2", "registry.example/billing-proxy:1.0"}; !slices.Equal(got, want) {
		t.Errorf("deployment images = %v, want %v (the proxy's repository only shares a prefix)", got, want)
	}
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	env := cs[0].(map[string]any)["env"].([]any)
	if env[0].(map[string]any)["value"] != "1.4.2" || env[1].(map[string]any)["value"] != "dpl_0123" {
		t.Errorf("env = %v", env)
	}
	cj := objectNamed(t, objs, "CronJob", "billing-report")
	if got := images(cj); !slices.Equal(got, []string{"registry.example/billing:1.4.2"}) {
		t.Errorf("cronjob images = %v (a digest is replaced by the version)", got)
	}
	if _, found, _ := unstructured.NestedMap(cj.Object, "spec", "jobTemplate", "spec", "template", "metadata"); found {
		t.Error("a CronJob's pod template is labelled; only Deployments, StatefulSets and DaemonSets are")
	}
	cm := objectNamed(t, objs, "ConfigMap", "billing-config")
	if data, _, _ := unstructured.NestedStringMap(cm.Object, "data"); data["application"] != "billing" || data["environment"] != "prod" {
		t.Errorf("configmap data = %v", data)
	}

	// Without with.image the images stay as written.
	plain := testVars
	plain.Image = ""
	objs, err = render(files, plain)
	if err != nil {
		t.Fatal(err)
	}
	if got := images(objectNamed(t, objs, "Deployment", "billing")); got[1] != "registry.example/billing:dev" {
		t.Errorf("images without with.image = %v", got)
	}
}

func TestRenderVersionLabel(t *testing.T) {
	files := []manifestFile{{Name: "cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")}}
	v := testVars
	v.Image = ""
	v.Version = "1.0.0+build.7" // not a label value
	objs, err := render(files, v)
	if err != nil {
		t.Fatal(err)
	}
	if l := objs[0].GetLabels(); l["manent.io/version"] != "" || l["manent.io/deploy-id"] != "dpl_0123" {
		t.Errorf("labels = %v, want no version label for a version that cannot be one", l)
	}
	v.Image = "registry.example/x"
	if _, err := render(files, v); err == nil || !plugin.IsPermanent(err) {
		t.Errorf("render with an image and a version that is no tag = %v, want a permanent error", err)
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name, data, want string
	}{
		{"no name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n", "without metadata.name"},
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", "Kind"},
		{"bad yaml", "apiVersion: v1\nkind: [\n", "document 1"},
		{"duplicate", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "also in"},
		{"empty", "---\n# nothing\n---\n", "no object"},
		{"bad template labels", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {template: {metadata: {labels: [a]}}}\n", "spec.template.metadata.labels"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render([]manifestFile{{Name: "m.yaml", Data: []byte(tc.data)}}, testVars)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !plugin.IsPermanent(err) {
				t.Errorf("render = %v, want a permanent error containing %q", err, tc.want)
			}
		})
	}
	bad := testVars
	bad.Environment = "not a label value!"
	if _, err := render([]manifestFile{{Name: "m.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")}}, bad); err == nil || !plugin.IsPermanent(err) {
		t.Errorf("render with a bad environment = %v, want a permanent error", err)
	}
}

func TestMatchesRepo(t *testing.T) {
	tests := []struct {
		image, repo string
		want        bool
	}{
		{"registry.example/billing", "registry.example/billing", true},
		{"registry.example/billing:dev", "registry.example/billing", true},
		{"registry.example/billing@sha256:abc", "registry.example/billing", true},
		{"registry.example/billing-proxy:1", "registry.example/billing", false},
		{"registry.example/billing/worker:1", "registry.example/billing", false},
		{"localhost:5000/app:1", "localhost:5000/app", true},
		{"other/billing:1", "registry.example/billing", false},
	}
	for _, tc := range tests {
		if got := matchesRepo(tc.image, tc.repo); got != tc.want {
			t.Errorf("matchesRepo(%q, %q) = %v, want %v", tc.image, tc.repo, got, tc.want)
		}
	}
}

func TestReadManifests(t *testing.T) {
	dir := t.TempDir()
	yamlDoc := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	single := filepath.Join(dir, "app.yaml")
	gzSingle := filepath.Join(dir, "app.yaml.gz")
	if err := os.WriteFile(single, yamlDoc, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gzSingle, gzipped(t, yamlDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	tgz := writeArchive(t, "testdata/app", filepath.Join(dir, "a.tgz"), "", true)
	plainTar := writeArchive(t, "testdata/app", filepath.Join(dir, "a.tar"), "./", false)
	noExt := writeArchive(t, "testdata/app", filepath.Join(dir, "download"), "", false)

	tests := []struct {
		name, artifact, manifests string
		want                      []string
		single                    bool
		err                       string
	}{
		{"tgz directory", tgz, "k8s/", []string{"k8s/config.yml", "k8s/deployment.yaml", "k8s/namespace.json"}, false, ""},
		{"tar with ./ entries", plainTar, "k8s", []string{"k8s/config.yml", "k8s/deployment.yaml", "k8s/namespace.json"}, false, ""},
		{"tar by content", noExt, "./k8s/", []string{"k8s/config.yml", "k8s/deployment.yaml", "k8s/namespace.json"}, false, ""},
		{"one file of the archive", tgz, "k8s/deployment.yaml", []string{"k8s/deployment.yaml"}, false, ""},
		{"archive root", tgz, ".", []string{"other.yaml"}, false, ""},
		{"single yaml", single, "k8s/", []string{"app.yaml"}, true, ""},
		{"gzipped single yaml", gzSingle, ".", []string{"app.yaml"}, true, ""},
		{"missing directory", tgz, "deploy/", nil, false, `no manifests at "deploy"`},
		{"missing artifact", filepath.Join(dir, "nope.tgz"), "k8s", nil, false, "does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files, single, err := readManifests(tc.artifact, tc.manifests)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !plugin.IsPermanent(err) {
					t.Fatalf("readManifests = %v, want a permanent error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, f := range files {
				names = append(names, f.Name)
			}
			if !slices.Equal(names, tc.want) || single != tc.single {
				t.Errorf("files = %v (single %v), want %v (single %v)", names, single, tc.want, tc.single)
			}
		})
	}
}

// A name or namespace no request can carry (client-go refuses it before
// asking the API server) fails the deploy at once, naming the file and the
// object: it was a retryable "invalid resource name", tried again
// max_retries times — for the checkpoint step too.
func TestRenderRefusesNamesNoRequestCanCarry(t *testing.T) {
	for _, tc := range []struct{ meta, want string }{
		{`{name: "a/b"}`, `manifest cm.yaml: ConfigMap "a/b": metadata.name may not contain '/'`},
		{`{name: ".."}`, `manifest cm.yaml: ConfigMap "..": metadata.name may not be '..'`},
		{`{name: "%2e%2e"}`, `manifest cm.yaml: ConfigMap "%2e%2e": metadata.name may not contain '%'`},
		{`{name: ok, namespace: "../../api"}`, `manifest cm.yaml: ConfigMap "ok": metadata.namespace "../../api" is not a namespace name`},
		{`{name: ok, namespace: "a\u001b[2Jb"}`, `manifest cm.yaml: ConfigMap "ok": metadata.namespace "a\x1b[2Jb" is not a namespace name`},
	} {
		files := []manifestFile{{Name: "cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: " + tc.meta + "\n")}}
		_, err := render(files, testVars)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !plugin.IsPermanent(err) {
			t.Errorf("metadata %s: %v (permanent %t), want a permanent error containing %q", tc.meta, err, plugin.IsPermanent(err), tc.want)
		}
	}
}
