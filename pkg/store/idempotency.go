package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"
)

// IdempotencyWindow is how long an Idempotency-Key's first answer is
// replayed (SPEC §11.1).
const IdempotencyWindow = 24 * time.Hour

// Idempotency is the first answer to an Idempotency-Key of an identity.
type Idempotency struct {
	Identity   string
	Key        string
	BodySHA256 string
	Status     int
	Response   []byte
	CreatedAt  time.Time
}

// ErrIdempotencyTaken says another request recorded the same key first.
var ErrIdempotencyTaken = errors.New("idempotency key already recorded")

// Idempotent returns the answer recorded for identity's key within the
// window, or nil.
func (s *Store) Idempotent(ctx context.Context, identity, key string) (*Idempotency, error) {
	var rec Idempotency
	var created string
	var resp string
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT identity, key, body_sha256, status, response, created_at
		FROM manent_idempotency WHERE identity = ? AND key = ? AND created_at >= ?`),
		identity, key, fmtTime(time.Now().Add(-IdempotencyWindow))).Scan(&rec.Identity, &rec.Key, &rec.BodySHA256, &rec.Status, &resp, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rec.Response = []byte(resp)
	if t := parseTime(sql.NullString{String: created, Valid: true}); t != nil {
		rec.CreatedAt = *t
	}
	return &rec, nil
}

// RecordIdempotency records the first answer to a key in tx, replacing an
// expired one; ErrIdempotencyTaken when a live one exists (a concurrent
// request with the same key won).
func (s *Store) RecordIdempotency(ctx context.Context, tx *sql.Tx, rec Idempotency) error {
	now := time.Now()
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM manent_idempotency WHERE identity = ? AND key = ? AND created_at < ?`),
		rec.Identity, rec.Key, fmtTime(now.Add(-IdempotencyWindow))); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_idempotency (identity, key, body_sha256, status, response, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`), rec.Identity, rec.Key, rec.BodySHA256, rec.Status, string(rec.Response), fmtTime(now))
	if err != nil && isUniqueViolation(err) {
		return ErrIdempotencyTaken
	}
	return err
}

// PruneIdempotency deletes the keys recorded before the window.
func (s *Store) PruneIdempotency(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, s.q(`DELETE FROM manent_idempotency WHERE created_at < ?`), fmtTime(time.Now().Add(-IdempotencyWindow)))
	return err
}

func isUniqueViolation(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "unique constraint") || strings.Contains(msg, "duplicate key") || strings.Contains(msg, "sqlstate 23505")
}
