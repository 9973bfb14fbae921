package deploy_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requirePodmanEnv makes a missing podman a failure instead of a skip
// (.ci/run installs it and sets it).
const requirePodmanEnv = "MANENT_TEST_REQUIRE_PODMAN"

// podman is the container engine the image test builds and runs the image
// with: no Docker engine runs on the CI machine kind, podman needs no
// daemon, and goreleaser drives it through a `docker` that is podman (as
// Debian's podman-docker package makes it).
type podman struct {
	bin  string
	conf string // CONTAINERS_CONF
	shim string // a directory whose docker runs podman
}

// newPodman finds podman (with runc, which the configuration below picks)
// and writes its configuration: ulimits at or below this process's own,
// since podman as root raises them to the maximum, which a machine
// without CAP_SYS_RESOURCE refuses; runc, since crun refuses a host with
// both cgroup v1 and v2 controllers. Neither changes what the image holds.
func newPodman(t *testing.T) *podman {
	t.Helper()
	bin, err := exec.LookPath("podman")
	if err == nil {
		_, err = exec.LookPath("runc")
	}
	if err != nil {
		if os.Getenv(requirePodmanEnv) == "1" {
			t.Fatalf("podman and runc are needed (%v) but %s=1", err, requirePodmanEnv)
		}
		t.Skip("no podman or runc: apt-get install podman runc")
	}
	dir := t.TempDir()
	p := &podman{bin: bin, conf: filepath.Join(dir, "containers.conf"), shim: filepath.Join(dir, "bin")}
	conf := "[containers]\ndefault_ulimits = [\"nofile=4096:4096\", \"nproc=4096:4096\"]\n[engine]\nruntime = \"runc\"\n"
	if err := os.WriteFile(p.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p.shim, 0o755); err != nil {
		t.Fatal(err)
	}
	shim := "#!/bin/sh\nexec " + bin + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(p.shim, "docker"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// env is the environment podman, or goreleaser driving it, runs in.
func (p *podman) env() []string {
	return append(os.Environ(), "CONTAINERS_CONF="+p.conf, "BUILDAH_LAYERS=false", "PATH="+p.shim+string(os.PathListSeparator)+os.Getenv("PATH"), "NO_COLOR=1")
}

// run runs podman with args and returns its standard output, trimmed.
func (p *podman) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(p.bin, args...)
	cmd.Env = p.env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("podman %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

func (p *podman) must(t *testing.T, args ...string) string {
	t.Helper()
	out, err := p.run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestImage builds the release image as a release does, with goreleaser's
// dockers_v2 from .goreleaser.yaml and Dockerfile.goreleaser (podman as
// buildx), for linux/amd64 and linux/arm64, and runs it:
//   - both images are what a release pushes: the version's tag for each
//     platform, the platform's architecture, its binaries built for it;
//   - the image runs as 65532:65532, has no shell, and its manent-server
//     reports goreleaser's version;
//   - started with its own entrypoint and command (nothing mounted), it
//     serves /healthz on 8080 and runs a whole deploy of examples/hello to
//     SUCCESS, driven by the release's manent CLI from outside: its SQLite
//     database and the deployed release live in /data, as nonroot; the
//     CLI inside the container reads its status with no flags.
//
// Only the builds' platforms are narrowed (linux, and the images named
// for this test so it touches no real tag); the image is the release's.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the release's linux binaries and image (-short)")
	}
	pm := newPodman(t)
	bin := goreleaserBin(t)
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	image := "localhost/manent-image-test-" + hex.EncodeToString(suffix)
	dist := filepath.Join(t.TempDir(), "dist")
	cfg := writeConfig(t, func(s string) string {
		r := strings.ReplaceAll(s, "    goos: [linux, darwin]\n", "    goos: [linux]\n")
		r = strings.Replace(r, "    images: [ghcr.io/manent-io/manent]\n", "    images: ["+image+"]\n", 1)
		if strings.Count(s, "goos: [linux, darwin]") != 4 || !strings.Contains(r, image) || strings.Contains(s, "\ndist:") {
			t.Fatal(".goreleaser.yaml changed shape: update TestImage's edits")
		}
		return r + "dist: " + dist + "\n"
	})
	t.Cleanup(func() {
		// Every tag the build made, whatever happened after it.
		if out, err := pm.run(t, "images", "--format", "{{.Repository}}:{{.Tag}}", image); err == nil {
			for _, ref := range strings.Fields(out) {
				_, _ = pm.run(t, "rmi", "--force", ref)
			}
		}
	})

	cmd := exec.Command(bin, "release", "--snapshot", "--clean", "--skip=archive,sbom,sign,publish", "--config", cfg)
	cmd.Dir = repoRoot(t)
	cmd.Env = pm.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("goreleaser release --snapshot: %v\n%s", err, out)
	}

	var meta struct{ Version string }
	readJSON(t, filepath.Join(dist, "metadata.json"), &meta)
	var artifacts []struct{ Name, Path, Type, Goos, Goarch string }
	readJSON(t, filepath.Join(dist, "artifacts.json"), &artifacts)
	images := map[string]bool{}
	var cli string
	for _, a := range artifacts {
		switch {
		case a.Type == "Docker Image":
			images[a.Name] = true
		case a.Type == "Binary" && a.Name == "manent" && a.Goarch == "amd64":
			cli = a.Path
		}
	}
	ref := func(arch string) string { return image + ":" + meta.Version + "-" + arch }
	for _, arch := range []string{"amd64", "arm64"} {
		if !images[ref(arch)] {
			t.Fatalf("goreleaser made images %v, want %s", images, ref(arch))
		}
		if got := pm.must(t, "image", "inspect", "--format", "{{.Os}}/{{.Architecture}} {{.Config.User}}", ref(arch)); got != "linux/"+arch+" 65532:65532" {
			t.Errorf("%s: platform and user %q, want linux/%s 65532:65532", ref(arch), got, arch)
		}
	}
	checkImageFiles(t, pm, ref("arm64"), elf.EM_AARCH64)
	checkImageFiles(t, pm, ref("amd64"), elf.EM_X86_64)

	amd64 := ref("amd64")
	if got := pm.must(t, "run", "--rm", amd64, "version"); !strings.Contains(got, meta.Version) {
		t.Errorf("manent-server version in the image: %q, want goreleaser's %s", got, meta.Version)
	}
	if out, err := pm.run(t, "run", "--rm", "--entrypoint", "/bin/sh", amd64, "-c", "true"); err == nil {
		t.Errorf("the image has a shell (/bin/sh ran: %q)", out)
	}

	// The image as it ships: its entrypoint and command, nothing mounted,
	// 8080 published on a free loopback port of this machine.
	ctr := "manent-image-test-" + hex.EncodeToString(suffix)
	pm.must(t, "run", "--detach", "--name", ctr, "--publish", "127.0.0.1::8080", amd64)
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := pm.run(t, "logs", ctr)
			t.Logf("container log:\n%s", logs)
		}
		_, _ = pm.run(t, "rm", "--force", ctr)
	})
	server := "http://" + pm.must(t, "port", ctr, "8080/tcp")
	waitHealthy(t, server+"/healthz")

	// The trial server's admin token, and the example's artifact, copied
	// through podman (the image has no shell to cat or untar with).
	work := t.TempDir()
	pm.must(t, "cp", ctr+":/data/admin.token", filepath.Join(work, "admin.token"))
	token, err := os.ReadFile(filepath.Join(work, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	artifact := filepath.Join(work, "hello-1.0.0.tar.gz")
	packSite(t, filepath.Join(repoRoot(t), "examples", "hello", "site"), artifact)
	pm.must(t, "cp", artifact, ctr+":/data/hello-1.0.0.tar.gz")
	// The example without its smoke step, which runs sh.
	descriptor := filepath.Join(work, "deploy.yml")
	writeFile(t, descriptor, "apiVersion: manent/v1\napplication: hello\nenvironment: staging\nversion: \"1.0.0\"\n"+
		"artifact:\n  url: file:///data/hello-1.0.0.tar.gz\n")

	deploy := exec.Command(cli, "deploy", "-f", descriptor, "--wait", "-o", "json")
	deploy.Env = append(os.Environ(), "HOME="+work, "XDG_CONFIG_HOME="+work,
		"MANENT_SERVER="+server, "MANENT_TOKEN="+strings.TrimSpace(string(token)))
	var stderr bytes.Buffer
	deploy.Stderr = &stderr
	dout, err := deploy.Output()
	if err != nil {
		t.Fatalf("manent deploy --wait against the image: %v\n%s\n%s", err, dout, stderr.String())
	}
	var result struct{ ID, State string }
	if err := json.Unmarshal(dout, &result); err != nil || result.State != "SUCCESS" {
		t.Fatalf("deploy in the image: %v %q, want SUCCESS\n%s", err, result.State, dout)
	}
	// The CLI in the container, with no flags (docker exec … manent
	// status), finds the trial server and its token.
	if got, err := pm.run(t, "exec", ctr, "manent", "status", result.ID, "-o", "json"); err != nil || !strings.Contains(got, `"SUCCESS"`) {
		t.Errorf("manent status inside the container: %v\n%s", err, got)
	}
	// The release is in /data, written by nonroot.
	pm.must(t, "cp", ctr+":/data/targets/hello/staging/current/index.html", filepath.Join(work, "index.html"))
	want, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "hello", "site", "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(work, "index.html")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the deployed index.html in the image differs from examples/hello/site (%v)", err)
	}
}

// checkImageFiles mounts ref's filesystem and reads it as it is in the
// image, whatever a runtime would create at start: the four binaries in
// /usr/local/bin built for machine, /data a directory owned by nonroot
// (podman would create a missing WORKDIR for the user at start; Docker
// would leave it to root), /tmp with mode 1777.
func checkImageFiles(t *testing.T, pm *podman, ref string, machine elf.Machine) {
	t.Helper()
	root := pm.must(t, "image", "mount", ref)
	defer func() { _, _ = pm.run(t, "image", "unmount", ref) }()
	for _, name := range []string{"manent-server", "manent", "manent-agent", "manent-policy"} {
		f, err := elf.Open(filepath.Join(root, "usr", "local", "bin", name))
		if err != nil {
			t.Errorf("%s: %v", ref, err)
			continue
		}
		if f.Machine != machine {
			t.Errorf("%s: %s is built for %v, want %v", ref, name, f.Machine, machine)
		}
		f.Close()
	}
	fi, err := os.Stat(filepath.Join(root, "data"))
	if err != nil {
		t.Errorf("%s: %v", ref, err)
	} else if st, ok := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || !ok || st.Uid != nonroot || st.Gid != nonroot {
		t.Errorf("%s: /data is %v %+v, want a directory owned by %d:%d", ref, fi.Mode(), fi.Sys(), nonroot, nonroot)
	}
	fi, err = os.Stat(filepath.Join(root, "tmp"))
	if err != nil {
		t.Errorf("%s: %v", ref, err)
	} else if fi.Mode() != os.ModeDir|os.ModeSticky|0o777 {
		t.Errorf("%s: /tmp has mode %v, want drwxrwxrwt", ref, fi.Mode())
	}
}

// waitHealthy polls url every 100 ms until it answers 200, for at most a
// minute.
func waitHealthy(t *testing.T, url string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.After(time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		select {
		case <-deadline:
			t.Fatalf("%s not healthy within a minute: %v", url, err)
		case <-tick.C:
		}
	}
}

// packSite writes dir's files as the gzip tar the example's artifact is.
func packSite(t *testing.T, dir, dst string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dst, buf.String())
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
