package notify

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers of a callback.
const (
	// HeaderID is the event's id: the same on every retry of the event.
	HeaderID = "webhook-id"
	// HeaderTimestamp is the attempt's time in Unix seconds.
	HeaderTimestamp = "webhook-timestamp"
	// HeaderSignature is "v1,<base64 signature>".
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts a secret written the Standard Webhooks way.
const SecretPrefix = "whsec_"

// MinSecretBytes is the shortest signing key ParseSecret accepts.
const MinSecretBytes = 16

// ParseSecret decodes a signing secret written as whsec_<base64> (the
// prefix may be left out, as the reference libraries allow). It refuses an
// empty secret, bad base64 and a key shorter than MinSecretBytes.
func ParseSecret(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	b64 := strings.TrimPrefix(s, SecretPrefix)
	if b64 == "" {
		return nil, errors.New("callback secret is empty: expected whsec_<base64>")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("callback secret is not whsec_<base64>: %w", err)
	}
	if len(key) < MinSecretBytes {
		return nil, fmt.Errorf("callback secret is %d bytes long, want at least %d", len(key), MinSecretBytes)
	}
	return key, nil
}

// NewSecret returns a fresh random secret in the whsec_<base64> form, with a
// 32-byte key.
func NewSecret() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// Sign returns the webhook-signature of a message: "v1," and the base64
// HMAC-SHA256, keyed with secret, of "<id>.<unix seconds of ts>.<body>".
func Sign(secret []byte, id string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(ts.Unix(), 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
