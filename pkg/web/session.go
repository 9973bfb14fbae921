package web

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// Cookie names.
const (
	sessionCookie = "manent_session"
	// loginCookie carries the CSRF secret of the sign-in form.
	loginCookie = "manent_login"
	// oidcCookie carries state, nonce and PKCE verifier during the
	// redirect to the issuer (SameSite=Lax: the issuer sends the browser
	// back with a cross-site navigation).
	oidcCookie = "manent_oidc"
)

// SessionTTL bounds a session; an OIDC session also ends with its ID token.
const SessionTTL = 12 * time.Hour

// maxSessionCookie bounds the session cookie's value: a sealed static
// token or OIDC ID token is far smaller (browsers keep cookies up to 4 KB);
// anything longer is refused before it is decoded.
const maxSessionCookie = 8 << 10

// maxBrowserCookie is the most a browser keeps of one cookie, name and
// value (RFC 6265 §6.1 asks for 4096 bytes at least; Chromium and Firefox
// keep no more): it drops a longer one without a word.
const maxBrowserCookie = 4096

// cookieTooLargeError says a sign-in's session cookie would be more than
// a browser keeps: its credential (an ID token with many claims) is too
// large.
type cookieTooLargeError struct {
	size   int
	method string
}

func (e *cookieTooLargeError) Error() string {
	return fmt.Sprintf("the session cookie would be %d bytes, more than the %d a browser keeps", e.size, maxBrowserCookie)
}

// message is what the sign-in page says of e.
func (e *cookieTooLargeError) message() string {
	what, fix := "This token is", "sign in with a static token (manent-server admin new-token)"
	if e.method == "oidc" {
		what, fix = "The ID token of your identity provider is", "have the provider send this client fewer claims (most often its groups claim holds most of them), or sign in with a token"
	}
	return fmt.Sprintf("%s too large to keep in the session cookie (%d bytes sealed; browsers keep %d): %s.", what, e.size, maxBrowserCookie, fix)
}

// sessionIDBytes is the size of a session's random id.
const sessionIDBytes = 16

// Sessions records the sessions signed out before they expired, for every
// worker of the database (store.Store satisfies it).
type Sessions interface {
	RevokeSession(ctx context.Context, id string, expires, now time.Time) error
	SessionRevoked(ctx context.Context, id string) (bool, error)
}

// errNoSession says the request has no usable session: no cookie, one that
// does not open, expired, without an id, or signed out. The browser signs
// in again. Other errors of readSession are the database's.
var errNoSession = errors.New("no session")

// session is what the session cookie holds, sealed.
type session struct {
	// ID is the session's random id (sessionIDBytes, base64url): sign-out
	// records it as revoked.
	ID string `json:"i"`
	// Credential is the bearer credential the user signed in with: a
	// static token or an OIDC ID token. Every request re-authenticates it.
	Credential string `json:"c"`
	// Method is "token" or "oidc".
	Method string `json:"m"`
	// Subject is the identity that signed in (for the audit log of the
	// sign-out; empty in cookies sealed before it was kept).
	Subject string `json:"u"`
	// CSRF is the session's CSRF token (every form carries it).
	CSRF    string `json:"x"`
	Expires int64  `json:"e"`
}

// sealer seals and opens cookies with AES-256-GCM under a key derived from
// the server's secret.
type sealer struct {
	aead cipher.AEAD
	mac  []byte // HMAC key of the sign-in form's CSRF token
}

func newSealer(secret []byte) (*sealer, error) {
	if len(secret) < 16 {
		return nil, errors.New("web: session secret shorter than 16 bytes")
	}
	derive := func(label string) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte("manent web " + label))
		return m.Sum(nil)
	}
	block, err := aes.NewCipher(derive("session cookie"))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead, mac: derive("login csrf")}, nil
}

// seal encrypts v (JSON) bound to the cookie name.
func (s *sealer) seal(name string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := s.aead.Seal(nonce, nonce, plain, []byte(name))
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// open decrypts a cookie value sealed under name into v.
func (s *sealer) open(name, value string, v any) error {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return errors.New("malformed cookie")
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(name))
	if err != nil {
		return errors.New("cookie does not open with this server's key")
	}
	return json.Unmarshal(plain, v)
}

// loginToken is the CSRF token of the sign-in form for the loginCookie value.
func (s *sealer) loginToken(cookie string) string {
	m := hmac.New(sha256.New, s.mac)
	m.Write([]byte(cookie))
	return hex.EncodeToString(m.Sum(nil))
}

func randomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func equalStrings(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// LoadSecret reads the web UI's session secret from path, creating it (32
// random bytes, hex, mode 0600) when missing. Every server that shares the
// sessions must share the file.
func LoadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		secret, derr := hex.DecodeString(strings.TrimSpace(string(b)))
		if derr != nil || len(secret) < 16 {
			return nil, fmt.Errorf("web session key %s: not at least 16 bytes of hex", path)
		}
		return secret, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("web session key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("web session key: %w", err)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) { // another server created it first
		return LoadSecret(path)
	}
	if err != nil {
		return nil, fmt.Errorf("web session key: %w", err)
	}
	_, werr := f.WriteString(hex.EncodeToString(secret) + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, fmt.Errorf("web session key: %w", werr)
	}
	return secret, nil
}

// secure reports whether the request came over TLS (directly or through a
// proxy that says so): cookies then carry Secure.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// hostPrefix starts the UI's cookie names over HTTPS. A browser takes a
// __Host- cookie only from the host itself over HTTPS, Secure, with
// Path=/ and without Domain: no sibling subdomain and no plain-HTTP page
// (a network attacker's) can set one — a session or sign-in state of the
// attacker's own that this server would read (session fixation, login
// CSRF). Over plain HTTP the prefix cannot be used (it needs Secure).
const hostPrefix = "__Host-"

// securePrefix starts the UI's cookie names over HTTPS under a path prefix
// (web.path_prefix): __Host- needs Path=/, which would send the session to
// every application of the host. A browser takes a __Secure- cookie only
// over HTTPS and Secure, so no plain-HTTP page can set one; a sibling
// subdomain over HTTPS still can (with Domain), which a host of manent's
// own avoids (docs/web.md).
const securePrefix = "__Secure-"

// cookieName is the name of the UI's cookie base for r: __Host-base over
// HTTPS (secure), __Secure-base over HTTPS under a path prefix, base over
// plain HTTP. Only that name is read: over HTTPS an unprefixed cookie may
// have been set by anyone on a sibling host.
func (h *Handler) cookieName(r *http.Request, base string) string {
	switch {
	case !secure(r):
		return base
	case h.prefix != "":
		return securePrefix + base
	}
	return hostPrefix + base
}

// cookiePath is the Path of the UI's cookies: / at the root of its host,
// else the path prefix, so that the browser sends them to manent only and
// not to the other applications of the host.
func (h *Handler) cookiePath() string {
	if h.prefix == "" {
		return "/"
	}
	return h.prefix
}

// cookie reads the UI's cookie base under the name in use for r.
func (h *Handler) cookie(r *http.Request, base string) (*http.Cookie, error) {
	return r.Cookie(h.cookieName(r, base))
}

// setCookie sets the UI's cookie base (named for r: cookieName).
func (h *Handler) setCookie(w http.ResponseWriter, r *http.Request, base, value string, maxAge int, sameSite http.SameSite) {
	http.SetCookie(w, &http.Cookie{
		Name: h.cookieName(r, base), Value: value, Path: h.cookiePath(), MaxAge: maxAge,
		HttpOnly: true, Secure: secure(r), SameSite: sameSite,
	})
}

// newSession makes the session of a sign-in of p with credential and its
// sealed cookie value. A cookie larger than a browser keeps is a
// *cookieTooLargeError: the browser would drop it without a word.
func (h *Handler) newSession(r *http.Request, p manent.Identity, credential, method string, expires time.Time) (session, string, error) {
	if max := h.now().Add(SessionTTL); expires.IsZero() || expires.After(max) {
		expires = max
	}
	s := session{ID: randomString(sessionIDBytes), Credential: credential, Method: method, Subject: p.Subject,
		CSRF: randomString(24), Expires: expires.Unix()}
	v, err := h.seal.seal(sessionCookie, s)
	if err != nil {
		return session{}, "", err
	}
	if n := len(h.cookieName(r, sessionCookie)) + len(v); n > maxBrowserCookie {
		return session{}, "", &cookieTooLargeError{size: n, method: method}
	}
	return s, v, nil
}

// startSession records the sign-in of session s (sealed as v) in the
// audit log and sets the session cookie. When the sign-in cannot be
// recorded, no session starts.
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, s session, v string) error {
	if err := h.audit(r, w, s.Subject, "web.sign-in", s, ""); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	h.setCookie(w, r, sessionCookie, v, int(time.Until(time.Unix(s.Expires, 0)).Seconds()), http.SameSiteStrictMode)
	return nil
}

// audit appends action on session s by subject to the audit log: the
// method (and why, when given) and a reference of the session
// (sessionRef), never its credential, id or cookie. The request id is the
// API's (its handler serves the UI and sets X-Request-Id on the answer).
func (h *Handler) audit(r *http.Request, w http.ResponseWriter, subject, action string, s session, why string) error {
	detail := "method=" + s.Method
	if why != "" {
		detail += "; " + why
	}
	return h.auditLog.AppendAudit(context.WithoutCancel(r.Context()), store.AuditEntry{
		Identity: subject, Action: action, Target: sessionRef(s.ID), RequestID: w.Header().Get("X-Request-Id"),
		Outcome: "accepted", Detail: detail,
	})
}

// sessionRef names a session in the audit log: a digest of its id, so a
// sign-out is matched to its sign-in while the id itself (what a
// revocation names) is not shown to the log's readers.
func sessionRef(id string) string {
	sum := sha256.Sum256([]byte("manent web session ref " + id))
	return "session:" + hex.EncodeToString(sum[:8])
}

// readSession returns the request's session: errNoSession when it has no
// valid one — including a session signed out on any worker, and a cookie
// sealed before sessions had ids (it cannot be revoked, so it is not
// honoured) — or the error of the revocation check.
func (h *Handler) readSession(r *http.Request) (session, error) {
	c, err := h.cookie(r, sessionCookie)
	if err != nil || len(c.Value) > maxSessionCookie {
		return session{}, errNoSession
	}
	var s session
	if err := h.seal.open(sessionCookie, c.Value, &s); err != nil {
		return session{}, errNoSession
	}
	if h.now().Unix() >= s.Expires || s.Credential == "" {
		return session{}, errNoSession
	}
	if !validSessionID(s.ID) {
		h.log.Debug("web: a session cookie without an id (sealed before revocation existed) is refused")
		return session{}, errNoSession
	}
	revoked, err := h.sessions.SessionRevoked(r.Context(), s.ID)
	if err != nil {
		return session{}, err
	}
	if revoked {
		h.log.Info("web: a signed-out session was presented", "remote", r.RemoteAddr, "path", r.URL.Path)
		return session{}, errNoSession
	}
	return s, nil
}

// validSessionID reports whether id is what startSession makes.
func validSessionID(id string) bool {
	if len(id) != base64.RawURLEncoding.EncodedLen(sessionIDBytes) {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil && len(b) == sessionIDBytes
}
