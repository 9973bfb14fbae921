package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// revokedPruneBatch bounds how many expired revocations one RevokeSession
// removes: each sign-out removes more rows than it adds, so the table stays
// at about the sign-outs of one session lifetime.
const revokedPruneBatch = 100

const (
	// sessionRevokedQuery runs on every web request with a session.
	sessionRevokedQuery = `SELECT 1 FROM manent_revoked_sessions WHERE id = ?`
	pruneRevokedQuery   = `DELETE FROM manent_revoked_sessions WHERE id IN
		(SELECT id FROM manent_revoked_sessions WHERE expires_at < ? ORDER BY expires_at LIMIT ?)`
)

// sessionKey is the row key of a session id: its SHA-256 in hex, so any
// id (of any length or bytes) is a fixed-size text key, and the table does
// not hold the ids themselves.
func sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// RevokeSession records that the web session id was signed out; expires is
// the session's own end, after which the row is pruned. Revoking an id
// twice is not an error. The same transaction removes up to a batch of
// revocations whose session has expired (as of now).
func (s *Store) RevokeSession(ctx context.Context, id string, expires, now time.Time) error {
	if id == "" {
		return errors.New("revoke session: empty id")
	}
	err := s.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.q(pruneRevokedQuery),
			now.Unix(), revokedPruneBatch); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_revoked_sessions (id, expires_at, revoked_at)
			VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING`), sessionKey(id), expires.Unix(), now.Unix())
		return err
	})
	if err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

// SessionRevoked reports whether the web session id was signed out: one
// primary-key read on the read pool (it never takes SQLite's write lock).
func (s *Store) SessionRevoked(ctx context.Context, id string) (bool, error) {
	var one int
	err := s.rdb.QueryRowContext(ctx, s.q(sessionRevokedQuery), sessionKey(id)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check session revocation: %w", err)
	}
	return true, nil
}
