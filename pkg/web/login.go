package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/manent-io/manent/pkg/manent"
)

// loginView is the sign-in page.
type loginView struct {
	Next string
	OIDC bool
	// Error is a message the server chose (loginErrors), never text of
	// the request.
	Error string
}

// loginErrors are the codes the server puts in /login?error= and the
// texts the sign-in page shows for them. Any other value shows nothing:
// the page never reflects text from the URL, which anyone can craft into
// a link to the real server ("Your session expired, call …").
var loginErrors = map[string]string{
	// page: a session cookie came but is no longer honoured (signed
	// out, expired, its credential no longer valid).
	loginErrSessionEnded: "Your session has ended: sign in again.",
}

// Codes of loginErrors.
const loginErrSessionEnded = "session_ended"

// loginError is the sign-in page's text for the code in ?error=, or "".
func loginError(code string) string { return loginErrors[code] }

// loginCSRF returns the sign-in form's CSRF token, setting its cookie when
// the browser has none.
func (h *Handler) loginCSRF(w http.ResponseWriter, r *http.Request) string {
	if c, err := h.cookie(r, loginCookie); err == nil && len(c.Value) >= 16 {
		return h.seal.loginToken(c.Value)
	}
	v := randomString(24)
	h.setCookie(w, r, loginCookie, v, 3600, http.SameSiteStrictMode)
	return h.seal.loginToken(v)
}

func (h *Handler) oidcEnabled() bool {
	return h.cfg.OIDC != nil && h.cfg.OIDC.ClientID != ""
}

func (h *Handler) handleLoginForm(w http.ResponseWriter, r *http.Request) {
	next := h.localPath(r.URL.Query().Get("next"))
	_, err := h.signedIn(r)
	if err == nil {
		// Signed in: no message of loginErrors would be true.
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if _, cerr := h.cookie(r, sessionCookie); cerr == nil && errors.Is(err, errNoSession) {
		// A session cookie that is no longer honoured (expired, signed
		// out, sealed before sessions had ids): the browser drops it.
		h.setCookie(w, r, sessionCookie, "", -1, http.SameSiteStrictMode)
	}
	if _, cerr := r.Cookie(sessionCookie); cerr == nil && secure(r) {
		// An unprefixed session cookie over HTTPS (sealed before the
		// __Host- prefix, or set by another host) is not read: dropped.
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
		if h.prefix != "" {
			http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: h.prefix, MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
		}
	}
	if _, cerr := r.Cookie(hostPrefix + sessionCookie); cerr == nil && secure(r) && h.prefix != "" {
		// A session of this UI from before it moved under a path prefix:
		// not read, and sent to every application of the host (Path=/).
		http.SetCookie(w, &http.Cookie{Name: hostPrefix + sessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	}
	p := &pageData{Title: "Sign in", CSRF: h.loginCSRF(w, r), Data: loginView{Next: next, OIDC: h.oidcEnabled(),
		Error: loginError(r.URL.Query().Get("error"))}}
	h.render(w, r, "login", http.StatusOK, p)
}

// handleLogin signs in with a static token: the same authentication as the
// API's bearer tokens.
func (h *Handler) handleLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		h.renderError(w, r, nil, http.StatusBadRequest, "The form could not be read.")
		return
	}
	c, err := h.cookie(r, loginCookie)
	if err != nil || !equalStrings(h.seal.loginToken(c.Value), r.PostForm.Get("csrf")) {
		h.renderError(w, r, nil, http.StatusForbidden, "This form is missing its CSRF token: reload the sign-in page and try again.")
		return
	}
	next := h.localPath(r.PostForm.Get("next"))
	if !h.limitSignIn(w, r, next) {
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	prev, perr := h.readSession(r)
	if perr != nil && !errors.Is(perr, errNoSession) {
		h.uncheckedSession(w, r, perr)
		return
	}
	fail := func(msg string) {
		p := &pageData{Title: "Sign in", CSRF: h.loginCSRF(w, r), Data: loginView{Next: next, OIDC: h.oidcEnabled(), Error: msg}}
		h.render(w, r, "login", http.StatusUnauthorized, p)
	}
	if token == "" {
		fail("Enter a token.")
		return
	}
	id, err := h.guard.Authenticate(r.Context(), "Bearer "+token)
	if err != nil {
		h.signIns.Refused(h.clientKey(r))
		h.log.Info("web: sign-in refused", "address", h.clientKey(r), "error", err)
		fail("This token is not valid.")
		return
	}
	notStarted := func(err error) {
		h.log.Error("web: sign-in", "identity", id.Subject, "error", err)
		h.renderError(w, r, nil, http.StatusInternalServerError, "The session could not be started.")
	}
	s, sealed, err := h.newSession(r, id, token, "token", time.Time{})
	if big := (*cookieTooLargeError)(nil); errors.As(err, &big) {
		h.log.Info("web: sign-in refused", "identity", id.Subject, "error", err)
		fail(big.message())
		return
	} else if err != nil {
		notStarted(err)
		return
	}
	if perr == nil && !h.endPrevious(w, r, h.priorSessionOf(r, prev)) {
		return
	}
	if err := h.startSession(w, r, s, sealed); err != nil {
		notStarted(err)
		return
	}
	h.setCookie(w, r, loginCookie, "", -1, http.SameSiteStrictMode)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// priorSession is what a sign-in needs of the session the browser held
// before: enough to revoke it and audit its end, not its credential.
type priorSession struct {
	ID      string `json:"i"`
	Method  string `json:"m,omitempty"`
	Subject string `json:"u,omitempty"`
	Expires int64  `json:"e"`
}

func (h *Handler) priorSessionOf(r *http.Request, s session) *priorSession {
	return &priorSession{ID: s.ID, Method: s.Method, Subject: h.subjectOf(r, s), Expires: s.Expires}
}

// subjectOf is the identity that signed session s in: as the cookie keeps
// it, or for a cookie sealed before it kept it, as its credential
// authenticates now ("" if it no longer does).
func (h *Handler) subjectOf(r *http.Request, s session) string {
	if s.Subject != "" {
		return s.Subject
	}
	if p, err := h.guard.Authenticate(r.Context(), "Bearer "+s.Credential); err == nil {
		return p.Subject
	}
	return ""
}

// endPrevious ends, before a sign-in starts a new session, the session the
// browser held until then (nil: none): a copy of its cookie must not
// outlive the browser's move to another session. It answers the request
// and returns false when the revocation could not be recorded.
func (h *Handler) endPrevious(w http.ResponseWriter, r *http.Request, prev *priorSession) bool {
	if prev == nil || prev.ID == "" {
		return true
	}
	// The OIDC sign-in took a while: the session may have been signed
	// out meanwhile, and then has nothing left to end.
	revoked, err := h.sessions.SessionRevoked(r.Context(), prev.ID)
	if err != nil {
		h.uncheckedSession(w, r, err)
		return false
	}
	if revoked {
		return true
	}
	if err := h.sessions.RevokeSession(r.Context(), prev.ID, time.Unix(prev.Expires, 0), h.now()); err != nil {
		h.log.Error("web: sign-in: revoking the previous session", "error", err)
		h.renderError(w, r, nil, http.StatusServiceUnavailable, "Your previous session could not be ended: the database did not answer. Try again in a moment.")
		return false
	}
	if err := h.audit(r, w, prev.Subject, "web.sign-out", session{ID: prev.ID, Method: prev.Method}, "replaced by a new sign-in"); err != nil {
		h.log.Error("web: audit of a replaced session failed", "identity", prev.Subject, "error", err)
	}
	return true
}

// handleLogout ends the session on every worker: its id is recorded as
// revoked (until the session would have expired), so a copy of the cookie
// is refused too, then the browser drops the cookie.
func (h *Handler) handleLogout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	s, serr := h.readSession(r)
	if serr != nil && !errors.Is(serr, errNoSession) {
		h.uncheckedSession(w, r, serr)
		return
	}
	if err := r.ParseForm(); err != nil || serr != nil || !equalStrings(s.CSRF, r.PostForm.Get("csrf")) {
		h.renderError(w, r, nil, http.StatusForbidden, "This form is missing its CSRF token or its session.")
		return
	}
	if err := h.sessions.RevokeSession(r.Context(), s.ID, time.Unix(s.Expires, 0), h.now()); err != nil {
		// The cookie is kept: the user sees the sign-out did not happen
		// and can try again, rather than believing a copy is dead.
		h.log.Error("web: sign-out", "error", err)
		h.renderError(w, r, nil, http.StatusServiceUnavailable, "The sign-out could not be recorded: the database did not answer. Your session is still valid; try again in a moment.")
		return
	}
	subject := h.subjectOf(r, s)
	if err := h.audit(r, w, subject, "web.sign-out", s, ""); err != nil {
		// The session is revoked, which is what the user asked for.
		h.log.Error("web: audit of a sign-out failed", "identity", subject, "error", err)
	}
	h.setCookie(w, r, sessionCookie, "", -1, http.SameSiteStrictMode)
	http.Redirect(w, r, h.prefix+"/login", http.StatusSeeOther)
}

// oidcErrorCodes are the error codes of an authorization response (RFC
// 6749 §4.1.2.1, OpenID Connect Core §3.1.2.6) the callback names.
var oidcErrorCodes = map[string]bool{
	"invalid_request": true, "unauthorized_client": true, "access_denied": true, "unsupported_response_type": true,
	"invalid_scope": true, "server_error": true, "temporarily_unavailable": true,
	"interaction_required": true, "login_required": true, "account_selection_required": true, "consent_required": true,
	"invalid_request_uri": true, "invalid_request_object": true, "request_not_supported": true,
	"request_uri_not_supported": true, "registration_not_supported": true,
}

// oidcClient is the OAuth 2 configuration found by discovery.
type oidcClient struct {
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
}

// oidcState is the oidcCookie: what the callback must find again.
type oidcState struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
	Redirect string `json:"r"`
	Expires  int64  `json:"e"`
	// Prior is the session the browser held when the sign-in started:
	// the callback, a navigation from the issuer's site, does not get
	// the SameSite=Strict session cookie, and ends that session.
	Prior *priorSession `json:"p,omitempty"`
}

// issuer runs discovery once (and again after a failure).
func (h *Handler) issuer(ctx context.Context) (*oidcClient, error) {
	h.oidcMu.Lock()
	defer h.oidcMu.Unlock()
	if h.oidc != nil {
		return h.oidc, nil
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, h.cfg.HTTPClient), 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(ctx, h.cfg.OIDC.Issuer)
	if err != nil {
		return nil, err
	}
	h.oidc = &oidcClient{provider: p, verifier: p.VerifierContext(oidc.ClientContext(context.Background(), h.cfg.HTTPClient),
		&oidc.Config{ClientID: h.cfg.OIDC.ClientID, Now: h.now})}
	return h.oidc, nil
}

func (h *Handler) oauth(c *oidcClient, redirect string) *oauth2.Config {
	return &oauth2.Config{
		ClientID: h.cfg.OIDC.ClientID, ClientSecret: h.cfg.OIDC.ClientSecret,
		Endpoint: c.provider.Endpoint(), RedirectURL: redirect,
		Scopes: []string{oidc.ScopeOpenID, "email", "profile"},
	}
}

// callbackURL is this server's /login/callback as the browser reaches it
// (under the path prefix): the redirect URL to register at the issuer.
func (h *Handler) callbackURL(r *http.Request) string {
	scheme := "http"
	if secure(r) {
		scheme = "https"
	}
	return (&url.URL{Scheme: scheme, Host: r.Host, Path: h.prefix + "/login/callback"}).String()
}

// handleOIDCStart sends the browser to the issuer: authorization code
// flow with PKCE (S256), a state and a nonce.
func (h *Handler) handleOIDCStart(w http.ResponseWriter, r *http.Request) {
	if !h.oidcEnabled() {
		h.renderError(w, r, nil, http.StatusNotFound, "Sign-in through an identity provider is not configured (auth.oidc.client_id).")
		return
	}
	c, err := h.issuer(r.Context())
	if err != nil {
		h.log.Warn("web: oidc discovery", "issuer", h.cfg.OIDC.Issuer, "error", err)
		h.renderError(w, r, nil, http.StatusServiceUnavailable, "The identity provider cannot be reached; sign in with a token or try again later.")
		return
	}
	st := oidcState{State: randomString(24), Nonce: randomString(24), Verifier: oauth2.GenerateVerifier(),
		Next: h.localPath(r.URL.Query().Get("next")), Redirect: h.callbackURL(r), Expires: h.now().Add(10 * time.Minute).Unix()}
	switch prev, err := h.readSession(r); {
	case err == nil:
		st.Prior = h.priorSessionOf(r, prev)
	case !errors.Is(err, errNoSession):
		h.uncheckedSession(w, r, err)
		return
	}
	v, err := h.seal.seal(oidcCookie, st)
	if err == nil && len(h.cookieName(r, oidcCookie))+len(v) > maxBrowserCookie && st.Next != h.home() {
		// A page address too long for the cookie a browser keeps: the
		// sign-in lands on the home page rather than fail at the callback.
		st.Next = h.home()
		v, err = h.seal.seal(oidcCookie, st)
	}
	if err != nil {
		h.renderError(w, r, nil, http.StatusInternalServerError, "The sign-in could not be started.")
		return
	}
	h.setCookie(w, r, oidcCookie, v, 600, http.SameSiteLaxMode)
	http.Redirect(w, r, h.oauth(c, st.Redirect).AuthCodeURL(st.State, oauth2.S256ChallengeOption(st.Verifier), oidc.Nonce(st.Nonce)), http.StatusFound)
}

// handleOIDCCallback exchanges the code (with the PKCE verifier), checks
// the ID token's nonce and then authenticates it exactly as the API
// authenticates a bearer token.
func (h *Handler) handleOIDCCallback(w http.ResponseWriter, r *http.Request) {
	if !h.oidcEnabled() {
		h.renderError(w, r, nil, http.StatusNotFound, "Sign-in through an identity provider is not configured.")
		return
	}
	failed := func(status int, msg string) {
		h.setCookie(w, r, oidcCookie, "", -1, http.SameSiteLaxMode)
		h.renderError(w, r, nil, status, msg)
	}
	var st oidcState
	ck, err := h.cookie(r, oidcCookie)
	if err != nil || h.seal.open(oidcCookie, ck.Value, &st) != nil || h.now().Unix() > st.Expires {
		failed(http.StatusBadRequest, "The sign-in took too long or was started in another browser; start again.")
		return
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		// Anyone can craft this URL: the page names a standard code
		// only; the issuer's description goes to the log.
		h.log.Info("web: oidc sign-in refused by the issuer", "error", manent.ClipText(e, 100), "description", manent.ClipText(q.Get("error_description"), 300))
		msg := "The identity provider refused the sign-in."
		if oidcErrorCodes[e] {
			msg = "The identity provider refused the sign-in (" + e + ")."
		}
		failed(http.StatusUnauthorized, msg)
		return
	}
	if !equalStrings(st.State, q.Get("state")) {
		failed(http.StatusForbidden, "The sign-in answer does not match the sign-in this browser started (state).")
		return
	}
	c, err := h.issuer(r.Context())
	if err != nil {
		failed(http.StatusServiceUnavailable, "The identity provider cannot be reached.")
		return
	}
	ctx := oidc.ClientContext(r.Context(), h.cfg.HTTPClient)
	tok, err := h.oauth(c, st.Redirect).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(st.Verifier))
	if err != nil {
		h.log.Info("web: oidc code exchange", "error", err)
		failed(http.StatusUnauthorized, "The identity provider did not accept the sign-in code.")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		failed(http.StatusUnauthorized, "The identity provider sent no ID token.")
		return
	}
	idt, err := c.verifier.Verify(ctx, raw)
	if err == nil && !equalStrings(st.Nonce, idt.Nonce) {
		err = errors.New("nonce does not match")
	}
	if err != nil {
		h.log.Info("web: oidc id token", "error", err)
		failed(http.StatusUnauthorized, "The ID token is not valid for this server.")
		return
	}
	id, err := h.guard.Authenticate(r.Context(), "Bearer "+raw)
	if err != nil {
		h.log.Info("web: oidc id token refused by authentication", "error", err)
		msg := "The identity provider signed you in, but this server does not accept its ID token (is auth.oidc.audience the client_id?)."
		if me := (*manent.Error)(nil); errors.As(err, &me) && me.Code == manent.EUnauthorized {
			// Why, in authentication's words: they never quote the token.
			msg = "The identity provider signed you in, but this server does not accept its ID token: " + me.Message + "."
		}
		failed(http.StatusForbidden, msg)
		return
	}
	notStarted := func(err error) {
		h.log.Error("web: sign-in", "identity", id.Subject, "error", err)
		failed(http.StatusInternalServerError, "The session could not be started.")
	}
	s, sealed, err := h.newSession(r, id, raw, "oidc", idt.Expiry)
	if big := (*cookieTooLargeError)(nil); errors.As(err, &big) {
		h.log.Info("web: oidc sign-in refused", "identity", id.Subject, "error", err)
		failed(http.StatusBadRequest, big.message())
		return
	} else if err != nil {
		notStarted(err)
		return
	}
	if !h.endPrevious(w, r, st.Prior) {
		h.setCookie(w, r, oidcCookie, "", -1, http.SameSiteLaxMode)
		return
	}
	if err := h.startSession(w, r, s, sealed); err != nil {
		notStarted(err)
		return
	}
	h.setCookie(w, r, oidcCookie, "", -1, http.SameSiteLaxMode)
	// The browser came from the issuer: a SameSite=Strict cookie set now is
	// not sent on redirects of that navigation, so continue from a page of
	// this site.
	h.render(w, r, "continue", http.StatusOK, &pageData{Title: "Signed in", Data: st.Next})
}
