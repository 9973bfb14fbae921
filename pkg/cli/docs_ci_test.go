package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// docs/ci.md's pipelines, run as written on its deploy.yml with a commit
// hash that is all digits, leave a descriptor that validates: `version` (and
// source.commit) must be quoted, or YAML reads a number and the descriptor
// is refused. The shell of each pipeline's deploy step runs for real (bash,
// sed, git show in this repository); only its `manent` lines are left out
// and replaced by `manent validate --offline` in-process.
func TestDocsCIQuotesVersion(t *testing.T) {
	for _, tool := range []string{"bash", "sed", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	gitDir, err := exec.Command("git", "-C", root, "rev-parse", "--absolute-git-dir").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	doc := filepath.Join(root, "docs", "ci.md")
	descriptor := readmeBlock(t, doc, "The examples below use this `deploy.yml`", "yaml")

	var gh struct {
		Jobs map[string]struct {
			Steps []struct{ Name, Run string }
		}
	}
	if err := yaml.Unmarshal([]byte(readmeBlock(t, doc, "## GitHub Actions", "yaml")), &gh); err != nil {
		t.Fatalf("the GitHub Actions workflow of docs/ci.md does not parse: %v", err)
	}
	var ghScript string
	for _, s := range gh.Jobs["deploy"].Steps {
		if s.Name == "Deploy" && ghScript == "" {
			ghScript = s.Run
		}
	}
	var gl struct {
		DeployProd struct{ Script []string } `yaml:"deploy-prod"`
	}
	if err := yaml.Unmarshal([]byte(readmeBlock(t, doc, "## GitLab CI", "yaml")), &gl); err != nil {
		t.Fatalf("the .gitlab-ci.yml of docs/ci.md does not parse: %v", err)
	}
	glScript := strings.Join(gl.DeployProd.Script, "\n")

	const sha = "0123456789012345678901234567890123456789" // all digits
	env := append(os.Environ(), "GIT_DIR="+strings.TrimSpace(string(gitDir)),
		"GITHUB_SHA="+sha, "GITHUB_SERVER_URL=https://github.com", "GITHUB_REPOSITORY=example/billing",
		"CI_COMMIT_SHA="+sha, "CI_COMMIT_SHORT_SHA="+sha[:8], "CI_PROJECT_URL=https://gitlab.example/billing",
		"CI_COMMIT_TIMESTAMP=2026-11-30T16:04:05+01:00")
	for name, script := range map[string]string{"GitHub Actions": ghScript, "GitLab CI": glScript} {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(script, "sed -i") {
				t.Fatalf("no sed -i in the deploy step of %s:\n%s", name, script)
			}
			var kept []string
			for _, line := range strings.Split(script, "\n") {
				if !strings.HasPrefix(strings.TrimSpace(line), "manent ") {
					kept = append(kept, line)
				}
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "deploy.yml"), []byte(descriptor), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", strings.Join(kept, "\n"))
			cmd.Dir, cmd.Env = dir, env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("the deploy step of %s: %v\n%s", name, err, out)
			}
			got, _ := os.ReadFile(filepath.Join(dir, "deploy.yml"))
			if !strings.Contains(string(got), "version: \""+sha[:8]) {
				t.Fatalf("the pipeline did not write the quoted short SHA as version:\n%s", got)
			}
			if code, out, errOut := runCLIIn(t, dir, nil, "validate", "--offline", "-f", "deploy.yml"); code != 0 {
				t.Fatalf("validate --offline of the deploy.yml %s writes exited %d:\n%s%s\n%s", name, code, out, errOut, got)
			}
		})
	}

	// The control: the same descriptor with the version unquoted is refused,
	// so the check above can fail.
	dir := t.TempDir()
	bad := strings.Replace(descriptor, "version: dev", "version: "+sha[:8], 1)
	if err := os.WriteFile(filepath.Join(dir, "deploy.yml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLIIn(t, dir, nil, "validate", "--offline", "-f", "deploy.yml"); code != 1 || !strings.Contains(errOut, "version") {
		t.Fatalf("an unquoted all-digit version: exit %d, want 1 naming version:\n%s", code, errOut)
	}
}
