package urlpolicy

import "net/url"

// Redact is raw as an error or a log line may quote it: without user
// information, query and fragment, where credentials and tokens travel
// (`https://user:pw@host/p?token=…#…` is `https://host/p`); "(bad URL)"
// when raw does not parse, and "" for "".
func Redact(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(bad URL)"
	}
	u.User, u.RawQuery, u.Fragment, u.RawFragment, u.ForceQuery = nil, "", "", "", false
	return u.String()
}
