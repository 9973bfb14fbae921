package admit

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/manent"
)

// checkSecrets refuses a descriptor's secret that names what the server
// keeps to itself: an env: variable MANENT_* (the server's configuration,
// MANENT_BOOTSTRAP_TOKEN, MANENT_DATABASE) or one of ServerEnv
// (callbacks.secret_env, itsm.token_env), and, when secrets.files_under is
// set, a file: path outside its directories. The secrets step only checks
// that a secret resolves, but its error tells the submitter whether the
// variable is set or the file exists on the worker: without this check any
// submitter could probe for them.
func (a *Admitter) checkSecrets(d *descriptor.Descriptor) []manent.FieldError {
	var problems []manent.FieldError
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	for _, name := range slices.Sorted(maps.Keys(d.Secrets)) {
		ref := d.Secrets[name]
		kind, arg, _ := strings.Cut(ref, ":")
		var msg string
		switch kind {
		case "env":
			if msg = a.serverEnv(arg); msg == "" {
				msg = a.secretEnv(arg)
			}
		case "file":
			msg = a.secretFile(arg)
		}
		if msg != "" {
			problems = append(problems, manent.FieldError{Path: "/secrets/" + esc.Replace(name),
				Message: fmt.Sprintf("secret %s: %s", name, msg)})
		}
	}
	return problems
}

// serverEnv says why a secret may not name variable name, or "".
func (a *Admitter) serverEnv(name string) string {
	if strings.HasPrefix(name, "MANENT_") {
		return fmt.Sprintf("env:%s is one of the server's own variables (MANENT_*), which a deploy's secrets may not name: put the secret in a variable of its own on the workers", name)
	}
	if key, ok := a.cfg.ServerEnv[name]; ok {
		return fmt.Sprintf("env:%s holds %s's secret on %s, which a deploy's secrets may not name: put the secret in a variable of its own on the workers", name, key, a.here())
	}
	return ""
}

// secretEnv says why a secret may not name variable name, or "": not
// among SecretEnv (secrets.env, else plugins.pass_env) on a configured
// server. Whether the variable is set is never looked at here: the
// refusal is the same for a set and an unset variable, so a submitter
// learns nothing of the worker's environment beyond the names the
// operators allowed.
func (a *Admitter) secretEnv(name string) string {
	if a.cfg.Trial || envAllowed(a.cfg.SecretEnv, name) {
		return ""
	}
	from := a.cfg.SecretEnvFrom
	if from == "" {
		from = "secrets.env"
	}
	list := "none"
	if len(a.cfg.SecretEnv) > 0 {
		list = strings.Join(a.cfg.SecretEnv, ", ")
	}
	return fmt.Sprintf("env:%s is not among the variables a deploy's secrets may name on %s (%s: %s): ask the operators to add it to secrets.env", name, a.here(), from, list)
}

// envAllowed says whether variable name is in allowed: an exact name, or a
// prefix written with a trailing `*` ("BILLING_*"; "*" alone: any).
func envAllowed(allowed []string, name string) bool {
	for _, p := range allowed {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if p == name {
			return true
		}
	}
	return false
}

// secretFile says why a secret may not name file path, or "": outside
// secrets.files_under when it is set. The path is judged as written,
// cleaned (no `..` leads out); links inside those directories are the
// operators' and are followed when the secret is read.
func (a *Admitter) secretFile(path string) string {
	dirs := a.cfg.SecretFilesUnder
	if len(dirs) == 0 {
		return ""
	}
	where := fmt.Sprintf("secrets.files_under on %s: %s", a.here(), strings.Join(dirs, ", "))
	if !filepath.IsAbs(path) {
		return fmt.Sprintf("file:%s is not an absolute path, and file: secrets must be under %s", path, where)
	}
	clean := filepath.Clean(path)
	for _, dir := range dirs {
		if rel, err := filepath.Rel(filepath.Clean(dir), clean); err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return ""
		}
	}
	return fmt.Sprintf("file:%s is not under the directories file: secrets may name (%s): put the file there, or ask the operators", path, where)
}
