package version

import "testing"

func TestInfoString(t *testing.T) {
	tests := []struct {
		info Info
		want string
	}{
		{Info{Version: "dev", Commit: "dev", Date: "dev", Go: "go1.26.8"}, "dev (commit dev, built dev, go1.26.8)"},
		{
			Info{Version: "v1.2.3", Commit: "0123456789abcdef0123", Date: "2026-01-02T03:04:05Z", Go: "go1.26.8"},
			"v1.2.3 (commit 0123456789ab, built 2026-01-02T03:04:05Z, go1.26.8)",
		},
	}
	for _, tt := range tests {
		if got := tt.info.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestGetDefaults(t *testing.T) {
	i := Get()
	if i.Version == "" || i.Commit == "" || i.Date == "" || i.Go == "" {
		t.Errorf("Get() has empty fields: %+v", i)
	}
}
