package urlpolicy

import "testing"

func TestRedact(t *testing.T) {
	for raw, want := range map[string]string{
		"": "",
		"https://user:pw@hooks.example.com/a/b?token=s3cret#frag": "https://hooks.example.com/a/b",
		"https://hooks.example.com/a?":                            "https://hooks.example.com/a",
		"http://[::1]:8080/x?apikey=1":                            "http://[::1]:8080/x",
		"https://host/%zz":                                        "(bad URL)",
		"http://a b/?token=s3cret":                                "(bad URL)",
	} {
		if got := Redact(raw); got != want {
			t.Errorf("Redact(%q) = %q, want %q", raw, got, want)
		}
	}
}
