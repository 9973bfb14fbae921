package deploy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// requireGoreleaserEnv makes a missing goreleaser a failure instead of a
// skip (.ci/run builds it and sets it).
const requireGoreleaserEnv = "MANENT_TEST_REQUIRE_GORELEASER"

// goreleaserBin is the goreleaser binary: $MANENT_GORELEASER, else
// goreleaser on PATH. Without it the test is skipped, or fails when
// MANENT_TEST_REQUIRE_GORELEASER=1.
func goreleaserBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MANENT_GORELEASER"); p != "" {
		return p
	}
	p, err := exec.LookPath("goreleaser")
	if err != nil {
		if os.Getenv(requireGoreleaserEnv) == "1" {
			t.Fatalf("no goreleaser binary (MANENT_GORELEASER or PATH) but %s=1", requireGoreleaserEnv)
		}
		t.Skip("no goreleaser binary: set MANENT_GORELEASER or put goreleaser on PATH")
	}
	return p
}

// repoRoot is the repository's top directory, where goreleaser runs (the
// builds' main packages are relative to it).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// goreleaser runs bin with args in the repository's top directory and
// returns its combined output (colourless).
func goreleaser(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// deprecationWarned reports whether goreleaser's output warns of a
// deprecated or phased-out setting (it still exits 0 for those).
func deprecationWarned(out string) bool {
	l := strings.ToLower(out)
	return strings.Contains(l, "deprecat") || strings.Contains(l, "phased out")
}

// writeConfig writes a copy of .goreleaser.yaml, changed by edit, into a
// temporary directory and returns its path.
func writeConfig(t *testing.T, edit func(string) string) string {
	t.Helper()
	cfg, err := os.ReadFile(filepath.Join("..", ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "goreleaser.yaml")
	if err := os.WriteFile(p, []byte(edit(string(cfg))), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGoreleaserCheck runs `goreleaser check` on .goreleaser.yaml: it must
// pass with no deprecation warning. The same check refuses a config with
// an unknown key, and the warning detector sees the notice the old
// `dockers` section gets, so neither half of the assertion is vacuous.
func TestGoreleaserCheck(t *testing.T) {
	bin := goreleaserBin(t)
	cfg := filepath.Join(repoRoot(t), ".goreleaser.yaml")
	out, err := goreleaser(t, bin, "check", "--config", cfg)
	if err != nil {
		t.Fatalf("goreleaser check: %v\n%s", err, out)
	}
	if deprecationWarned(out) {
		t.Errorf("goreleaser check warns of a deprecation:\n%s", out)
	}

	unknown := writeConfig(t, func(s string) string {
		r := strings.Replace(s, "\ndockers_v2:\n", "\ndockers_v3:\n", 1)
		if r == s {
			t.Fatal(".goreleaser.yaml has no dockers_v2 section")
		}
		return r
	})
	out, err = goreleaser(t, bin, "check", "--config", unknown)
	if err == nil {
		t.Errorf("goreleaser check accepts an unknown key (dockers_v3):\n%s", out)
	} else if !strings.Contains(out, "dockers_v3") {
		t.Errorf("goreleaser check refused the unknown key without naming it:\n%s", out)
	}

	old := writeConfig(t, func(s string) string {
		return s + "dockers:\n  - ids: [manent-server]\n    image_templates: [\"ghcr.io/manent-io/manent:{{ .Version }}-amd64\"]\n"
	})
	out, err = goreleaser(t, bin, "check", "--config", old)
	if err != nil {
		t.Fatalf("goreleaser check with a dockers section: %v\n%s", err, out)
	}
	if !deprecationWarned(out) {
		t.Errorf("no deprecation warning seen for a dockers section:\n%s", out)
	}
}

// gitStatus is `git status` of the repository, untracked and ignored files
// included, so a file goreleaser leaves behind (dist/ is ignored) shows.
func gitStatus(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("git", "status", "--porcelain=v1", "--untracked-files=all", "--ignored")
	cmd.Dir = repoRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git status: %v: %s", err, stderr.String())
	}
	return string(out)
}

// TestGoreleaserSnapshotBuild builds the manent CLI for this machine's
// platform with goreleaser (`build --snapshot --single-target --id
// manent`) from .goreleaser.yaml with only dist moved into a temporary
// directory, and runs it: `manent version` must print the version, commit
// and date goreleaser recorded in dist/metadata.json, i.e. the ldflags -X
// reach pkg/version. The repository tree is left as it was.
func TestGoreleaserSnapshotBuild(t *testing.T) {
	bin := goreleaserBin(t)
	dist := filepath.Join(t.TempDir(), "dist")
	cfg := writeConfig(t, func(s string) string {
		if strings.Contains(s, "\ndist:") {
			t.Fatal(".goreleaser.yaml sets dist: the test would have two")
		}
		return s + "dist: " + dist + "\n"
	})

	before := gitStatus(t)
	out, err := goreleaser(t, bin, "build", "--snapshot", "--single-target", "--id", "manent", "--config", cfg)
	if err != nil {
		t.Fatalf("goreleaser build: %v\n%s", err, out)
	}
	if after := gitStatus(t); after != before {
		t.Errorf("goreleaser build changed the repository tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	var meta struct {
		Version string    `json:"version"`
		Commit  string    `json:"commit"`
		Date    time.Time `json:"date"`
	}
	readJSON(t, filepath.Join(dist, "metadata.json"), &meta)
	if !strings.Contains(meta.Version, "SNAPSHOT") {
		t.Fatalf("metadata version %q, want a snapshot version", meta.Version)
	}
	// goreleaser reads the commit from git, and says "none" when git
	// cannot tell it everything (e.g. a clone with no remote).
	if meta.Commit != "none" {
		head := exec.Command("git", "rev-parse", "HEAD")
		head.Dir = repoRoot(t)
		h, err := head.Output()
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimSpace(string(h)); meta.Commit != want {
			t.Errorf("metadata commit %q, want HEAD %s", meta.Commit, want)
		}
	}
	var artifacts []struct {
		Name, Path, Type, Goos, Goarch string
	}
	readJSON(t, filepath.Join(dist, "artifacts.json"), &artifacts)
	var binary string
	for _, a := range artifacts {
		if a.Type != "Binary" {
			continue
		}
		if binary != "" || a.Name != "manent" || a.Goos != runtime.GOOS || a.Goarch != runtime.GOARCH {
			t.Fatalf("artifacts %+v, want the one binary manent for %s/%s", artifacts, runtime.GOOS, runtime.GOARCH)
		}
		binary = a.Path
	}
	if binary == "" {
		t.Fatalf("no binary in artifacts.json: %+v", artifacts)
	}

	cmd := exec.Command(binary, "version", "--client", "-o", "json")
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home)
	vout, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s version: %v", binary, err)
	}
	var info struct {
		Version, Commit, Date string
	}
	if err := json.Unmarshal(vout, &info); err != nil {
		t.Fatalf("manent version -o json: %v\n%s", err, vout)
	}
	if info.Version != meta.Version {
		t.Errorf("manent version %q, want goreleaser's %q", info.Version, meta.Version)
	}
	if info.Commit != meta.Commit {
		t.Errorf("manent commit %q, want goreleaser's %q", info.Commit, meta.Commit)
	}
	built, err := time.Parse(time.RFC3339, info.Date)
	if err != nil || !built.Equal(meta.Date.Truncate(time.Second)) {
		t.Errorf("manent date %q, want goreleaser's %s to the second", info.Date, meta.Date)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
