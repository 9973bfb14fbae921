package cli_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/cli"
)

func TestMainWith(t *testing.T) {
	var stdout, stderr bytes.Buffer
	env := map[string]string{"NO_COLOR": "1"}
	code := cli.MainWith([]string{"version", "-o", "json"}, strings.NewReader(""), &stdout, &stderr, func(k string) string { return env[k] })
	if code != 0 || !strings.Contains(stdout.String(), `"version":`) || stderr.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}

	stdout.Reset()
	code = cli.MainWith([]string{"wait"}, nil, &stdout, &stderr, nil)
	if code != int(cli.ExitUsage) || stdout.Len() != 0 || !strings.HasPrefix(stderr.String(), "Error: missing deploy id\n") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}
