package plugin

import (
	"net/url"
	"strings"
)

// Redacted replaces a value readers must not see.
const Redacted = "[redacted]"

// redactedInURL replaces a secret inside a URL, as url.URL.Redacted does
// (brackets would be escaped).
const redactedInURL = "xxxxx"

// sensitiveWords mark a setting, parameter or URL query key whose value is a
// credential (compared lower-case, as substrings).
var sensitiveWords = []string{"passw", "passphrase", "secret", "token", "credential", "authorization", "cookie",
	"apikey", "api_key", "api-key", "access_key", "private_key", "signature"}

// SensitiveKey says whether a setting or parameter named key holds a
// credential by its name: `password`, `api_token`, `AWS_SECRET_ACCESS_KEY`,
// `Authorization`, `X-Amz-Signature`, `sig`.
func SensitiveKey(key string) bool {
	k := strings.ToLower(key)
	if k == "sig" || k == "auth" {
		return true
	}
	for _, w := range sensitiveWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// RedactSettings returns a copy of settings (a target's or a step's `with`,
// a deploy's parameters) fit to show to anyone who may read the deploy: the
// values of `headers` and of keys named like credentials (SensitiveKey)
// become "[redacted]", and URLs lose the password of their user
// information and the values of query parameters named like credentials.
// The deploy itself runs with the original; only what is stored for
// readers, returned by the API or streamed is redacted.
func RedactSettings(settings map[string]any) map[string]any {
	if settings == nil {
		return nil
	}
	out, _ := redactValue(settings, false).(map[string]any)
	return out
}

func redactValue(v any, hide bool) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			switch {
			case hide || SensitiveKey(k):
				out[k] = Redacted
			case strings.EqualFold(k, "headers"):
				out[k] = redactValue(val, true)
			default:
				out[k] = redactValue(val, false)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = redactValue(val, hide)
		}
		return out
	case string:
		if hide {
			return Redacted
		}
		return RedactURL(x)
	default:
		if hide {
			return Redacted
		}
		return v
	}
}

// RedactQuery is RedactURL that hides the value of every query parameter,
// whatever its name: for a URL whose query is often its credential under a
// name that says nothing (a callback's `?code=`, `?key=`). The names stay,
// so a reader still sees which parameters it has.
func RedactQuery(s string) string { return redactURL(s, true) }

// RedactURL hides the credentials a URL may carry — the password of its
// user information and the values of query parameters named like
// credentials (a signed URL's `X-Amz-Signature`, `sig`, `token`) — with
// "xxxxx", and
// returns any other string unchanged.
func RedactURL(s string) string { return redactURL(s, false) }

// redactURL is RedactURL; with allValues it hides every query value, not
// only those named like credentials.
func redactURL(s string, allValues bool) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return s
	}
	changed := false
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), redactedInURL)
		changed = true
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = redactedInURL
			changed = true
		} else {
			hidden := false
			for k := range q {
				if allValues || SensitiveKey(k) {
					q[k] = []string{redactedInURL}
					hidden = true
				}
			}
			if hidden {
				u.RawQuery, changed = q.Encode(), true
			}
		}
	}
	if !changed {
		return s
	}
	return u.String()
}
