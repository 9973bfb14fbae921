package web

// SealSession seals v (a session's JSON fields, any of them forged) as
// the session cookie value of a server whose key is secret: what a holder
// of the key could send.
func SealSession(secret []byte, v any) (string, error) {
	s, err := newSealer(secret)
	if err != nil {
		return "", err
	}
	return s.seal(sessionCookie, v)
}
