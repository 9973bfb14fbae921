package urlpolicy

import (
	"fmt"
	"strings"

	"github.com/manent-io/manent/pkg/manent"
)

// Sources is the `artifacts.sources` policy: the URL patterns artifacts may
// be fetched from. The zero Sources allows nothing.
type Sources struct {
	patterns []pattern
}

// sourceSchemes are the schemes of artifact URLs (SPEC §2).
func sourceSchemes() []string { return []string{"file", "http", "https"} }

// NewSources compiles patterns such as "file:///srv/artifacts/**" and
// "https://artifacts.example/**". A mistake is an *manent.Error with code
// EInvalid and a field error per pattern ("artifacts.sources[1]").
//
// Bare IP addresses and CIDR prefixes ("10.20.0.0/16") are skipped: they
// match no URL, they only let downloads reach those addresses (see
// Outbound, which pkg/egress enforces).
func NewSources(patterns []string) (Sources, error) {
	var (
		s    Sources
		errs []manent.FieldError
	)
	for i, raw := range patterns {
		if !strings.Contains(raw, "://") {
			if _, err := parsePrefix(raw); err == nil {
				continue
			}
		}
		p, err := compilePattern(raw, sourceSchemes())
		if err != nil {
			errs = append(errs, manent.FieldError{Path: fmt.Sprintf("artifacts.sources[%d]", i), Message: fmt.Sprintf("%q: %v", raw, err)})
			continue
		}
		s.patterns = append(s.patterns, p)
	}
	if len(errs) > 0 {
		return Sources{}, &manent.Error{Code: manent.EInvalid, Message: "invalid artifacts.sources", Fields: errs}
	}
	return s, nil
}

// TrialPatterns are the sources of local trial mode (SPEC §8.1).
func TrialPatterns() []string { return []string{"file://**", "http://**", "https://**"} }

// TrialSources allows every file, http and https URL: local trial mode.
func TrialSources() Sources {
	s, err := NewSources(TrialPatterns())
	if err != nil {
		panic("urlpolicy: trial patterns do not compile: " + err.Error())
	}
	return s
}

// Patterns returns the URL patterns as configured.
func (s Sources) Patterns() []string {
	out := make([]string, len(s.patterns))
	for i, p := range s.patterns {
		out[i] = p.raw
	}
	return out
}

// Allowed returns nil if rawURL matches a pattern, else an *manent.Error
// with code EInvalid naming the URL and the patterns, with a field error at
// "/artifact/url" (the descriptor path of SPEC §2).
func (s Sources) Allowed(rawURL string) error {
	t, err := parseTarget(rawURL)
	if err != nil {
		return s.refuse(fmt.Sprintf("artifact URL %s: %v", t.display, err))
	}
	if t.scheme != "file" && t.scheme != "http" && t.scheme != "https" {
		return s.refuse(fmt.Sprintf("artifact URL %s: scheme %q is not one of http, https, file", t.display, t.scheme))
	}
	for _, p := range s.patterns {
		if p.match(t.canon) {
			return nil
		}
	}
	if len(s.patterns) == 0 {
		return s.refuse(fmt.Sprintf("artifact URL %s is not allowed: artifacts.sources is empty", t.display))
	}
	msg := fmt.Sprintf("artifact URL %s does not match artifacts.sources (allowed: %s)", t.display, strings.Join(s.Patterns(), ", "))
	for _, p := range s.patterns {
		// A directory written without "**" matches that one URL, never a
		// file in it: the likely mistake, said at once.
		if strings.HasSuffix(p.raw, "/") && !strings.Contains(p.raw, "*") && strings.HasPrefix(t.canon, p.raw) {
			msg += fmt.Sprintf("; %q matches that URL only, not the files below it: write %q", p.raw, p.raw+"**")
			break
		}
	}
	return s.refuse(msg)
}

func (s Sources) refuse(msg string) error {
	return &manent.Error{
		Code:    manent.EInvalid,
		Message: msg,
		Fields:  []manent.FieldError{{Path: "/artifact/url", Message: msg}},
	}
}
