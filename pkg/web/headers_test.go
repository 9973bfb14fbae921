package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// Every answer a browser can be sent to carries the security headers,
// those the API's own checks give before the UI sees the request too: a
// link with a byte that is not UTF-8 or a NUL in it is a 400, a request
// with a Content-Encoding a 415. They came without a
// Content-Security-Policy, X-Frame-Options or nosniff: a page another
// site could frame, and a body a browser could sniff.
func TestEveryAnswerCarriesTheSecurityHeaders(t *testing.T) {
	s := startUI(t)
	b := newBrowser(t, s.URL)
	for _, c := range []struct {
		path   string
		hdr    []string
		status int
	}{
		{"/login?next=%ff", nil, http.StatusBadRequest},
		{"/deployments/dpl_%00", nil, http.StatusBadRequest},
		{"/login", []string{"Content-Encoding", "gzip"}, http.StatusUnsupportedMediaType},
		{"/login", nil, http.StatusOK},
		{"/no-such-page", nil, http.StatusNotFound},
		{"/api/v1/deployments/dpl_%ff", nil, http.StatusBadRequest},
		{"/api/v1/nothing", nil, http.StatusNotFound},
	} {
		p := b.do(http.MethodGet, c.path, nil, c.hdr...)
		if p.Status != c.status {
			t.Errorf("GET %s %v: %d, want %d", c.path, c.hdr, p.Status, c.status)
		}
		csp := p.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s %v: Content-Security-Policy %q", c.path, c.hdr, csp)
		}
		if p.Header.Get("X-Frame-Options") != "DENY" || p.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s %v: X-Frame-Options %q, X-Content-Type-Options %q", c.path, c.hdr,
				p.Header.Get("X-Frame-Options"), p.Header.Get("X-Content-Type-Options"))
		}
	}
}
