package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// A UI address asked with a method it does not serve answers 405 with an
// Allow header naming the ones it does (as the API does), not the 404
// page, which would say the address has no page; an address with no page
// at all stays a 404 whatever the method.
func TestWrongMethodIs405(t *testing.T) {
	s := startUI(t)
	b := newBrowser(t, s.URL)
	b.login("alice-token")
	tests := []struct {
		method, path, allow string
	}{
		{http.MethodGet, "/deployments/dpl_x/approve", "POST"},
		{http.MethodGet, "/deployments/dpl_x/cancel", "POST"},
		{http.MethodPost, "/events", "GET, HEAD"},
		{http.MethodDelete, "/deployments/dpl_x", "GET, HEAD"},
		{http.MethodPut, "/login", "GET, HEAD, POST"},
		{http.MethodPost, "/", "GET, HEAD"},
	}
	for _, tt := range tests {
		p := b.do(tt.method, tt.path, nil)
		if p.Status != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d, want 405", tt.method, tt.path, p.Status)
			continue
		}
		if got := p.Header.Get("Allow"); got != tt.allow {
			t.Errorf("%s %s: Allow %q, want %q", tt.method, tt.path, got, tt.allow)
		}
		if !strings.Contains(p.Body, `<nav aria-label="Main">`) || !strings.Contains(p.Body, "answers "+tt.allow) {
			t.Errorf("%s %s: not the 405 page with the navigation:\n%s", tt.method, tt.path, p.Body)
		}
	}
	for _, path := range []string{"/nowhere", "/deployments/dpl_x/nothing"} {
		if p := b.do(http.MethodPost, path, nil); p.Status != http.StatusNotFound {
			t.Errorf("POST %s: %d, want 404", path, p.Status)
		}
	}
}
