package node

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/store"
)

// policyDigest digests what in cfg decides whether a deploy is admitted,
// waits and runs (docs/operations.md "One server or several workers"):
// workers that share a database should agree on all of it, and each
// records it in its manent_workers row so that they are told apart. Each
// part is digested on its own, so what differs can be named. Secrets are
// left out (tokens' hashes, the OIDC client secret, the ITSM token): a
// token's subject and groups are what policies see. bootstrap says a
// bootstrap admin token is configured (its admin rule), not which.
//
// The governance files are read again for their contents: the same rules
// at two paths agree, and a file edited under one path does not.
func policyDigest(cfg *Config, bootstrap bool) (store.WorkerConfig, error) {
	sorted := func(s []string) []string {
		out := append([]string{}, s...) // nil and empty alike
		slices.Sort(out)
		return out
	}
	file := func(key, path string) (any, error) {
		if path == "" {
			return nil, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		sum := sha256.Sum256(b)
		return map[string]string{key: hex.EncodeToString(sum[:])}, nil
	}
	rules, err := file("rules", cfg.Governance.Rules)
	if err != nil {
		return store.WorkerConfig{}, err
	}
	rego, err := file("rego", cfg.Governance.Rego)
	if err != nil {
		return store.WorkerConfig{}, err
	}
	type subject struct {
		Name   string   `json:"name"`
		Groups []string `json:"groups"`
	}
	tokens := make([]subject, len(cfg.Auth.Tokens))
	for i, tk := range cfg.Auth.Tokens {
		tokens[i] = subject{tk.Name, sorted(tk.Groups)}
	}
	slices.SortFunc(tokens, func(a, b subject) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	var oidc any
	if o := cfg.Auth.OIDC; o != nil {
		parts := []string{o.Issuer, o.Audience, o.Claim, o.GroupsClaim}
		if o.RequireEmailVerified != nil { // left out while unset, as below
			parts = append(parts, fmt.Sprintf("require_email_verified=%t", *o.RequireEmailVerified))
		}
		oidc = parts
	}
	parts := map[string]any{
		"governance":         []any{rules, rego},
		"itsm":               cfg.ITSM.URL != "",
		"rbac":               cfg.RBAC,
		"auth":               []any{tokens, oidc, bootstrap},
		"plugins.steps":      sorted(cfg.Plugins.Steps),
		"plugins.http_allow": sorted(cfg.Plugins.HTTPAllow),
		"pipeline.steps":     cfg.Pipeline.Steps,
		"artifacts.sources":  sorted(cfg.Artifacts.Sources),
		"callbacks.allow":    sorted(cfg.Callbacks.Allow),
		"health.allow":       sorted(cfg.Health.Allow),
		"trial":              cfg.Trial,
		"workflow":           engine.WorkflowVersion,
	}
	if len(cfg.Secrets.FilesUnder) > 0 {
		// A part added after a release is left out while unset, so that
		// workers of that release and this one agree (admin workers).
		parts["secrets.files_under"] = sorted(cfg.Secrets.FilesUnder)
	}
	if len(cfg.Secrets.Env) > 0 {
		parts["secrets.env"] = sorted(cfg.Secrets.Env)
	}
	out := store.WorkerConfig{Parts: map[string]string{}}
	for k, v := range parts {
		b, err := json.Marshal(v)
		if err != nil {
			return store.WorkerConfig{}, fmt.Errorf("digest %s: %w", k, err)
		}
		sum := sha256.Sum256(b)
		out.Parts[k] = hex.EncodeToString(sum[:6])
	}
	b, _ := json.Marshal(out.Parts) // keys sorted
	sum := sha256.Sum256(b)
	out.Digest = hex.EncodeToString(sum[:6])
	return out, nil
}
