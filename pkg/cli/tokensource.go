package cli

import (
	"errors"
	"fmt"

	"github.com/manent-io/manent/pkg/manent"
)

// TokenSource says where the configured token came from, so that a refused
// one is reported with its origin and a hint that fits it. It never holds
// the token.
type TokenSource struct {
	// Name is the origin as the error says it: "--token", "MANENT_TOKEN",
	// `context "prod"`, `the token file of context "prod" (/run/…)`,
	// "token: in /home/me/.config/manent/config.yaml" or "the trial admin
	// token file /…/admin.token"; "" when no token is configured.
	Name string
	// Hint says how to fix a token from that origin.
	Hint string
}

// tokenFromFlag, tokenFromEnv… build the TokenSource of each origin.
func tokenFromFlag() TokenSource {
	return TokenSource{Name: "--token",
		Hint: "hint: check the value of --token; without it, manent uses MANENT_TOKEN, the selected context's token or the config file's (see 'manent context')"}
}

func tokenFromEnv() TokenSource {
	return TokenSource{Name: "MANENT_TOKEN",
		Hint: "hint: MANENT_TOKEN holds a token this server does not accept: set the right one, or unset it to use the selected context's token (see 'manent context')"}
}

func tokenFromContext(name string, e *contextEntry) TokenSource {
	if e.Token != "" {
		return TokenSource{Name: fmt.Sprintf("context %q", name),
			Hint: fmt.Sprintf("hint: store a new token in context %q: manent login --context %s", name, name)}
	}
	return TokenSource{Name: fmt.Sprintf("the token file of context %q (%s)", name, e.TokenFile),
		Hint: fmt.Sprintf("hint: put a valid token in %s, or store one in the context: manent login --context %s", e.TokenFile, name)}
}

func tokenFromConfigFile(path string) TokenSource {
	return TokenSource{Name: "token: in " + path,
		Hint: "hint: store a new token with 'manent login' (it goes into a context), or fix token: in " + path}
}

func tokenFromTrialFile(path string) TokenSource {
	return TokenSource{Name: "the trial admin token file " + path,
		Hint: "hint: the server on this address is not the trial server that wrote this file (it was restarted elsewhere, or with --config): pass --token, set MANENT_TOKEN, or store one with 'manent login'"}
}

// explainRefusedToken turns the server's 401 or 403 for the configured
// token into an error that says which server refused the token from where,
// with a hint that fits (exit 2 as before): for a 401, how to fix a token
// from that origin; for a 403, that the token is valid but not allowed the
// request (the server's reason, quoted, names the missing permission when
// RBAC refused it). Other errors, and a refusal a command has explained
// itself (login checks a token of its own), pass unchanged.
func explainRefusedToken(f *Factory, err error) error {
	var (
		usage  *UsageError
		domain *manent.Error
	)
	if err == nil || errors.As(err, &usage) || !errors.As(err, &domain) ||
		(domain.Code != manent.EUnauthorized && domain.Code != manent.EForbidden) {
		return err
	}
	cfg, cerr := f.Config()
	if cerr != nil || cfg == nil {
		return err
	}
	refused := &refusedTokenError{Server: cfg.Server, Source: cfg.TokenSource.Name, Status: 401, Err: err}
	if domain.Code == manent.EForbidden {
		refused.Status = 403
		if cfg.Token == "" {
			refused.Source = ""
		}
		return &UsageError{Err: refused, Hint: forbiddenHint}
	}
	hint := cfg.TokenSource.Hint
	if cfg.Token == "" || hint == "" {
		refused.Source = ""
		hint = "hint: pass --token, set MANENT_TOKEN, or store one with 'manent login' (see 'manent context')"
	}
	return &UsageError{Err: refused, Hint: hint}
}

// forbiddenHint is the hint of a 403: the token itself is fine.
const forbiddenHint = "hint: the server accepted the token but does not allow it this request: use a token that may (--token, MANENT_TOKEN or another context, see 'manent context'), or ask the server's administrator to grant it (the rbac: rules of the server's configuration)"

// refusedTokenError is a 401 or 403 answer to the configured token (or to
// none).
type refusedTokenError struct {
	Server string
	Source string // "" when no token was sent
	Status int    // 401 or 403
	Err    error
}

func (e *refusedTokenError) Error() string {
	detail := e.Err.Error()
	switch {
	case e.Status == 403 && e.Source == "":
		return fmt.Sprintf("%s refused the request, sent without a token (403: %s)", e.Server, detail)
	case e.Status == 403:
		return fmt.Sprintf("%s refused the request made with the token from %s (403: %s)", e.Server, e.Source, detail)
	case e.Source == "":
		return fmt.Sprintf("%s asks for a token and none was sent (401: %s)", e.Server, detail)
	}
	return fmt.Sprintf("%s refused the token from %s (401: %s)", e.Server, e.Source, detail)
}

func (e *refusedTokenError) Unwrap() error { return e.Err }
