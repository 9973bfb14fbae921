package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Markers in key set errors. go-oidc flattens a KeySet's error into its own
// error text (with %v), where oidcVerifier.refusal finds them.
const (
	errKeysUnavailable = "cannot fetch the JWKS"
	errKeysNoMatch     = "no key of the issuer verifies the signature"
)

// maxJWKSSize bounds the JWKS response read into memory.
const maxJWKSSize = 1 << 20

// keySet is the issuer's JWKS as an oidc.KeySet. It verifies with the cached
// keys and, when they do not verify a token (an unknown kid after a key
// rotation, or a forgery), fetches the JWKS again: one fetch at a time and
// at most once per keysRefreshInterval, so tokens naming random key ids
// cannot make the server hammer the issuer.
//
// go-oidc's RemoteKeySet does the same without the bound, and may hand a
// caller the result of a fetch that finished just before it asked.
type keySet struct {
	url    string
	client *http.Client
	now    func() time.Time

	// fetching holds one token while a goroutine fetches; it guards
	// fetched and fetchErr.
	fetching chan struct{}
	fetched  time.Time // last attempt
	fetchErr error     // its error

	mu   sync.RWMutex
	keys []jose.JSONWebKey
}

func newKeySet(url string, client *http.Client, now func() time.Time) *keySet {
	return &keySet{url: url, client: client, now: now, fetching: make(chan struct{}, 1)}
}

// VerifySignature implements oidc.KeySet. go-oidc has already checked the
// algorithm against the accepted ones.
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, joseAlgs())
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("want exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	if payload, ok := verifyWith(jws, k.cached(), kid); ok {
		return payload, nil
	}
	keys, err := k.refresh(ctx)
	if err != nil {
		return nil, err
	}
	if payload, ok := verifyWith(jws, keys, kid); ok {
		return payload, nil
	}
	return nil, errors.New(errKeysNoMatch)
}

func (k *keySet) cached() []jose.JSONWebKey {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.keys
}

// refresh fetches the JWKS unless the last attempt is recent; then it
// returns the cached keys, or the last attempt's error if it failed.
// Callers that waited for another caller's fetch get its result.
func (k *keySet) refresh(ctx context.Context) ([]jose.JSONWebKey, error) {
	select {
	case k.fetching <- struct{}{}:
		defer func() { <-k.fetching }()
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", errKeysUnavailable, ctx.Err())
	}
	if !k.fetched.IsZero() && k.now().Sub(k.fetched) < keysRefreshInterval {
		if k.fetchErr != nil {
			return nil, k.fetchErr
		}
		return k.cached(), nil
	}
	keys, err := k.fetch(ctx)
	if err != nil {
		err = fmt.Errorf("%s: %w", errKeysUnavailable, err)
		if ctx.Err() == nil { // the caller giving up says nothing about the issuer
			k.fetched, k.fetchErr = k.now(), err
		}
		return nil, err
	}
	k.fetched, k.fetchErr = k.now(), nil
	k.mu.Lock()
	k.keys = keys
	k.mu.Unlock()
	return keys, nil
}

// fetch reads the JWKS. Keys go-jose cannot read (an unknown kty, say) are
// skipped rather than failing the whole set.
func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", k.url, resp.Status)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJWKSSize)).Decode(&set); err != nil {
		return nil, fmt.Errorf("GET %s: decode: %w", k.url, err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var key jose.JSONWebKey
		if json.Unmarshal(raw, &key) != nil || !key.Valid() || !key.IsPublic() {
			continue
		}
		if key.Use != "" && key.Use != "sig" {
			continue
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("GET %s: no usable signing key", k.url)
	}
	return keys, nil
}

// verifyWith verifies jws with the keys named kid (every key when the token
// names none).
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) ([]byte, bool) {
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		if payload, err := jws.Verify(&keys[i]); err == nil {
			return payload, true
		}
	}
	return nil, false
}

func joseAlgs() []jose.SignatureAlgorithm {
	var out []jose.SignatureAlgorithm
	for _, a := range signingAlgs() {
		out = append(out, jose.SignatureAlgorithm(a))
	}
	return out
}
