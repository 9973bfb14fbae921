package notify_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/notify"
)

// The published Standard Webhooks test vector.
func TestSignStandardWebhooksVector(t *testing.T) {
	key := mustSecret(t, testSecret)
	got := notify.Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

func TestSignVerifiesIndependently(t *testing.T) {
	secret := notify.NewSecret()
	key := mustSecret(t, secret)
	now := time.Now()
	body := []byte(`{"type":"started"}`)
	h := http.Header{}
	h.Set(notify.HeaderID, "dpl_1.started.cb0")
	h.Set(notify.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(notify.HeaderSignature, notify.Sign(key, "dpl_1.started.cb0", now, body))
	if err := verifyWebhook(secret, h, body, now, time.Minute); err != nil {
		t.Fatal(err)
	}
	tampered := append([]byte(nil), body...)
	tampered[2] = 'X'
	if err := verifyWebhook(secret, h, tampered, now, time.Minute); err == nil {
		t.Fatal("a tampered body verified")
	}
	if err := verifyWebhook(notify.NewSecret(), h, body, now, time.Minute); err == nil {
		t.Fatal("another secret verified")
	}
	if err := verifyWebhook(secret, h, body, now.Add(10*time.Minute), 5*time.Minute); err == nil {
		t.Fatal("a stale timestamp verified")
	}
}

func TestParseSecret(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantLen int
		wantErr string
	}{
		{"whsec form", testSecret, 24, ""},
		{"bare base64", strings.TrimPrefix(testSecret, "whsec_"), 24, ""},
		{"surrounding space", " " + testSecret + "\n", 24, ""},
		{"empty", "", 0, "empty"},
		{"prefix only", "whsec_", 0, "empty"},
		{"not base64", "whsec_not*base64!", 0, "not whsec_<base64>"},
		{"too short", "whsec_c2hvcnQ=", 0, "at least 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := notify.ParseSecret(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSecret(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.wantLen {
				t.Fatalf("key length = %d, want %d", len(got), tt.wantLen)
			}
		})
	}
}

func TestNewSecretParses(t *testing.T) {
	a, b := notify.NewSecret(), notify.NewSecret()
	if a == b || !strings.HasPrefix(a, "whsec_") {
		t.Fatalf("NewSecret = %q, %q", a, b)
	}
	if key := mustSecret(t, a); len(key) != 32 {
		t.Fatalf("key length = %d", len(key))
	}
}
