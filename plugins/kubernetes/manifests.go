package kubernetes

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	apipath "k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/plugin"
)

// Limits on what is read from an artifact: manifests are small text files.
const (
	maxManifestFile  = 8 << 20  // one file
	maxManifestTotal = 32 << 20 // all files
	maxManifestFiles = 500
	maxTarEntries    = 200_000
	maxObjects       = 2_000
)

// manifestFile is one manifest file read from the artifact.
type manifestFile struct {
	// Name is the file's path inside the artifact (its base name for a
	// single-file artifact).
	Name string
	Data []byte
}

// manifestExt reports whether name is a manifest file of a directory.
func manifestExt(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// cleanInside normalises a path inside an artifact ("./k8s/" → "k8s").
func cleanInside(p string) string {
	p = path.Clean("/" + strings.TrimSpace(p))
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return "."
	}
	return p
}

// readManifests reads the manifests at dir inside the artifact: the
// *.yaml, *.yml and *.json files directly in that directory (sorted by
// name), or that one file. A .tar.gz, .tgz or .tar artifact is read as an
// archive (by content, whatever its name); any other artifact is itself a
// single manifest file (possibly gzipped) and dir does not apply.
func readManifests(artifact, dir string) (files []manifestFile, single bool, err error) {
	f, err := os.Open(artifact)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, false, plugin.Permanent(fmt.Errorf("artifact %s does not exist", artifact))
		}
		return nil, false, fmt.Errorf("open artifact: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	name := filepath.Base(artifact)
	lower := strings.ToLower(name)
	if head, _ := r.Peek(2); len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, false, plugin.Permanent(fmt.Errorf("artifact %s: %w", name, err))
		}
		defer zr.Close()
		r = bufio.NewReader(zr)
		name = strings.TrimSuffix(strings.TrimSuffix(name, ".gz"), ".GZ")
	}
	head, _ := r.Peek(512)
	isTar := len(head) >= 262 && bytes.HasPrefix(head[257:], []byte("ustar")) ||
		strings.HasSuffix(lower, ".tar") || strings.HasSuffix(lower, ".tar.gz") || strings.HasSuffix(lower, ".tgz")
	if !isTar {
		data, err := io.ReadAll(io.LimitReader(r, maxManifestFile+1))
		if err != nil {
			return nil, true, plugin.Permanent(fmt.Errorf("read artifact %s: %w", name, err))
		}
		if len(data) > maxManifestFile {
			return nil, true, plugin.Permanent(fmt.Errorf("artifact %s is not an archive and is larger than %d bytes: not a manifest file", name, maxManifestFile))
		}
		return []manifestFile{{Name: name, Data: data}}, true, nil
	}
	files, err = readTar(r, cleanInside(dir))
	return files, false, err
}

func readTar(r io.Reader, want string) ([]manifestFile, error) {
	tr := tar.NewReader(r)
	var files []manifestFile
	var total int64
	for range maxTarEntries {
		h, err := tr.Next()
		if err == io.EOF {
			if len(files) == 0 {
				return nil, plugin.Permanent(fmt.Errorf("no manifests at %q in the artifact (a directory of *.yaml, *.yml or *.json files, or one file)", want))
			}
			slices.SortFunc(files, func(a, b manifestFile) int { return strings.Compare(a.Name, b.Name) })
			return files, nil
		}
		if err != nil {
			return nil, plugin.Permanent(fmt.Errorf("read artifact: %w", err))
		}
		if h.Typeflag != tar.TypeReg {
			continue // directories, links and devices are not manifests
		}
		name := cleanInside(h.Name)
		if name != want && (path.Dir(name) != want || !manifestExt(name)) {
			continue
		}
		if h.Size > maxManifestFile {
			return nil, plugin.Permanent(fmt.Errorf("manifest %s is larger than %d bytes", name, maxManifestFile))
		}
		total += h.Size
		if total > maxManifestTotal || len(files) >= maxManifestFiles {
			return nil, plugin.Permanent(fmt.Errorf("manifests at %q exceed %d files or %d bytes", want, maxManifestFiles, maxManifestTotal))
		}
		data, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if err != nil {
			return nil, plugin.Permanent(fmt.Errorf("read %s from the artifact: %w", name, err))
		}
		files = append(files, manifestFile{Name: name, Data: data})
	}
	return nil, plugin.Permanent(fmt.Errorf("artifact has more than %d entries", maxTarEntries))
}

// renderVars are what a deploy substitutes into its manifests and labels them with.
type renderVars struct {
	DeployID    string
	Application string
	Environment string
	Version     string
	// Image, when set, is a repository ("registry/app"): container images
	// that are it, or it with a tag or digest, become Image:Version.
	Image string
}

func varsOf(pc plugin.Context, image string) renderVars {
	return renderVars{DeployID: pc.DeployID, Application: pc.Application, Environment: pc.Environment, Version: pc.Version, Image: image}
}

// imageTag is the syntax of an image tag (distribution reference grammar).
var imageTag = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// labelSet returns the labels put on every object and pod template. The
// version label is left out when the version is not a valid label value
// (manent.io/version is optional; readiness does not depend on it).
func (v renderVars) labelSet() (map[string]string, error) {
	l := map[string]string{}
	for _, kv := range [][2]string{
		{clusterstate.LabelApplication, v.Application},
		{clusterstate.LabelEnvironment, v.Environment},
		{clusterstate.LabelDeployID, v.DeployID},
	} {
		if errs := validation.IsValidLabelValue(kv[1]); kv[1] == "" || len(errs) > 0 {
			return nil, plugin.Permanent(fmt.Errorf("%q cannot be the value of label %s: %s", kv[1], kv[0], strings.Join(errs, "; ")))
		}
		l[kv[0]] = kv[1]
	}
	if v.Version != "" && len(validation.IsValidLabelValue(v.Version)) == 0 {
		l[clusterstate.LabelVersion] = v.Version
	}
	return l, nil
}

// render substitutes ${MANENT_VERSION}, ${MANENT_DEPLOY_ID},
// ${MANENT_APPLICATION} and ${MANENT_ENVIRONMENT} in the manifest files,
// decodes every YAML or JSON document (a `kind: List` gives its items),
// labels each object — and the pod templates of Deployments, StatefulSets
// and DaemonSets — and substitutes the image. Objects come back in apply
// order: Namespaces, then CustomResourceDefinitions, then the rest as written.
// Namespaces are not set here (see resolve).
func render(files []manifestFile, v renderVars) ([]*unstructured.Unstructured, error) {
	labels, err := v.labelSet()
	if err != nil {
		return nil, err
	}
	if v.Image != "" && !imageTag.MatchString(v.Version) {
		return nil, plugin.Permanent(fmt.Errorf("version %q is not a valid image tag, so with.image cannot be substituted", v.Version))
	}
	rep := strings.NewReplacer(
		"${MANENT_VERSION}", v.Version, "${MANENT_DEPLOY_ID}", v.DeployID,
		"${MANENT_APPLICATION}", v.Application, "${MANENT_ENVIRONMENT}", v.Environment,
	)
	var objs []*unstructured.Unstructured
	seen := map[string]string{}
	for _, f := range files {
		docs, err := decode([]byte(rep.Replace(string(f.Data))))
		if err != nil {
			return nil, plugin.Permanent(fmt.Errorf("manifest %s: %w", f.Name, err))
		}
		for _, u := range docs {
			if u.GetName() == "" {
				return nil, plugin.Permanent(fmt.Errorf("manifest %s: %s without metadata.name (generateName cannot be applied)", f.Name, u.GetKind()))
			}
			// What no request can carry (client-go refuses it before the API
			// server sees it): no attempt can succeed.
			if bad := apipath.IsValidPathSegmentName(u.GetName()); len(bad) > 0 {
				return nil, plugin.Permanent(fmt.Errorf("manifest %s: %s %q: metadata.name %s", f.Name, u.GetKind(), u.GetName(), strings.Join(bad, "; ")))
			}
			if ns := u.GetNamespace(); ns != "" {
				if bad := validation.IsDNS1123Label(ns); len(bad) > 0 {
					return nil, plugin.Permanent(fmt.Errorf("manifest %s: %s %q: metadata.namespace %q is not a namespace name: %s", f.Name, u.GetKind(), u.GetName(), ns, strings.Join(bad, "; ")))
				}
			}
			key := u.GroupVersionKind().GroupKind().String() + " " + u.GetNamespace() + "/" + u.GetName()
			if first, dup := seen[key]; dup {
				return nil, plugin.Permanent(fmt.Errorf("manifest %s: %s is also in %s", f.Name, key, first))
			}
			seen[key] = f.Name
			if err := label(u, labels); err != nil {
				return nil, plugin.Permanent(fmt.Errorf("manifest %s: %w", f.Name, err))
			}
			if v.Image != "" {
				if err := substituteImage(u, v.Image, v.Version); err != nil {
					return nil, plugin.Permanent(fmt.Errorf("manifest %s: %w", f.Name, err))
				}
			}
			objs = append(objs, u)
			if len(objs) > maxObjects {
				return nil, plugin.Permanent(fmt.Errorf("more than %d objects in the manifests", maxObjects))
			}
		}
	}
	if len(objs) == 0 {
		return nil, plugin.Permanent(fmt.Errorf("the manifests hold no object"))
	}
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int { return applyRank(a) - applyRank(b) })
	return objs, nil
}

// applyRank orders objects that others depend on first.
func applyRank(u *unstructured.Unstructured) int {
	gk := u.GroupVersionKind().GroupKind()
	switch {
	case gk.Group == "" && gk.Kind == "Namespace":
		return 0
	case gk.Group == "apiextensions.k8s.io" && gk.Kind == "CustomResourceDefinition":
		return 1
	}
	return 2
}

// decode splits a manifest file into objects.
func decode(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for i := 0; i <= maxObjects; i++ {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		raw.Raw = bytes.TrimSpace(raw.Raw)
		if len(raw.Raw) == 0 || string(raw.Raw) == "null" {
			continue
		}
		obj, _, err := unstructured.UnstructuredJSONScheme.Decode(raw.Raw, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		switch o := obj.(type) {
		case *unstructured.Unstructured:
			out = append(out, o)
		case *unstructured.UnstructuredList:
			for j := range o.Items {
				out = append(out, &o.Items[j])
			}
		default:
			return nil, fmt.Errorf("document %d: unexpected %T", i+1, obj)
		}
	}
	return nil, fmt.Errorf("more than %d documents", maxObjects)
}

// podTemplateKinds are the workloads whose pod template is labelled too.
var podTemplateKinds = []string{clusterstate.KindDeployment, clusterstate.KindStatefulSet, clusterstate.KindDaemonSet}

func isWorkload(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Group == "apps" && slices.Contains(podTemplateKinds, gvk.Kind)
}

// label adds labels to u's metadata and, for a workload, its pod template.
func label(u *unstructured.Unstructured, labels map[string]string) error {
	l := u.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	for k, v := range labels {
		l[k] = v
	}
	u.SetLabels(l)
	if !isWorkload(u) {
		return nil
	}
	tl, _, err := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
	if err != nil {
		return fmt.Errorf("%s %s: spec.template.metadata.labels: %w", u.GetKind(), u.GetName(), err)
	}
	if tl == nil {
		tl = map[string]string{}
	}
	for k, v := range labels {
		tl[k] = v
	}
	return unstructured.SetNestedStringMap(u.Object, tl, "spec", "template", "metadata", "labels")
}

// podSpecPath returns where u's pod spec is, nil when it has none.
func podSpecPath(u *unstructured.Unstructured) []string {
	gvk := u.GroupVersionKind()
	switch {
	case gvk.Group == "" && gvk.Kind == "Pod":
		return []string{"spec"}
	case gvk.Group == "" && gvk.Kind == "ReplicationController",
		gvk.Group == "apps" && (slices.Contains(podTemplateKinds, gvk.Kind) || gvk.Kind == "ReplicaSet"),
		gvk.Group == "batch" && gvk.Kind == "Job":
		return []string{"spec", "template", "spec"}
	case gvk.Group == "batch" && gvk.Kind == "CronJob":
		return []string{"spec", "jobTemplate", "spec", "template", "spec"}
	}
	return nil
}

// matchesRepo reports whether image is repo, with or without a tag or digest.
func matchesRepo(image, repo string) bool {
	rest, ok := strings.CutPrefix(image, repo)
	return ok && (rest == "" || rest[0] == ':' || rest[0] == '@')
}

// substituteImage sets image:version on the containers (and init
// containers) of u's pod spec whose image is repo.
func substituteImage(u *unstructured.Unstructured, repo, version string) error {
	at := podSpecPath(u)
	if at == nil {
		return nil
	}
	for _, field := range []string{"containers", "initContainers"} {
		p := append(slices.Clone(at), field)
		cs, found, err := unstructured.NestedSlice(u.Object, p...)
		if err != nil {
			return fmt.Errorf("%s %s: %s: %w", u.GetKind(), u.GetName(), strings.Join(p, "."), err)
		}
		if !found {
			continue
		}
		changed := false
		for _, c := range cs {
			m, ok := c.(map[string]any)
			if !ok {
				continue
			}
			if img, _ := m["image"].(string); matchesRepo(img, repo) {
				m["image"] = repo + ":" + version
				changed = true
			}
		}
		if changed {
			if err := unstructured.SetNestedSlice(u.Object, cs, p...); err != nil {
				return err
			}
		}
	}
	return nil
}

// images lists the container images of u's pod spec, in order.
func images(u *unstructured.Unstructured) []string {
	at := podSpecPath(u)
	if at == nil {
		return nil
	}
	var out []string
	for _, field := range []string{"initContainers", "containers"} {
		cs, _, _ := unstructured.NestedSlice(u.Object, append(slices.Clone(at), field)...)
		for _, c := range cs {
			if m, ok := c.(map[string]any); ok {
				if img, _ := m["image"].(string); img != "" {
					out = append(out, img)
				}
			}
		}
	}
	return out
}

// marshalManifests writes objs as one multi-document YAML stream.
func marshalManifests(objs []*unstructured.Unstructured) ([]byte, error) {
	var b bytes.Buffer
	for i, u := range objs {
		y, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}
