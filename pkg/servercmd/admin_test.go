package servercmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A mistyped admin task exits 2 naming it, instead of printing the help and
// exiting 0 (a script's `admin verify-adit` would pass unchecked).
func TestAdminUnknownTask(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), []string{"admin", "verify-adit"}, &stdout, &stderr, nil)
	if code != 2 || !strings.Contains(stderr.String(), `unknown command "verify-adit" for "manent-server admin"`) {
		t.Fatalf("exit %d, stderr %q; want 2 and the unknown task named", code, stderr.String())
	}
	stdout.Reset()
	if code := Run(context.Background(), []string{"admin"}, &stdout, &stderr, nil); code != 0 || !strings.Contains(stdout.String(), "verify-audit") {
		t.Fatalf("admin alone: exit %d, stdout %q; want its help", code, stdout.String())
	}
}
