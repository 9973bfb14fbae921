package server

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"unicode"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// Idempotent submission (SPEC §11.1): a submit with an Idempotency-Key
// header is answered once; the same key from the same identity within 24 h
// gets the first answer again (same status, same id) with
// Idempotent-Replayed: true, and the same key with another body is a 422.
// Only acceptances are recorded (202, 201): a refused submission may be
// sent again with the same key once the cause is fixed. The answer is
// recorded in the transaction that makes the deploy durable, so a client
// that lost the connection can always retry safely.
//
// POST …/environments/{application}/{environment}/rollback honours the
// header the same way (see rollbackDigestBody): a repeated rollback
// answers with the deploy the first one created.

const (
	idempotencyHeader = "Idempotency-Key"
	replayedHeader    = "Idempotent-Replayed"
	maxKeyLength      = 255
)

// idempotencyKey returns the request's Idempotency-Key ("" when none), or a
// 422 when it is not a sane key.
func idempotencyKey(r *http.Request) (string, error) {
	key := r.Header.Get(idempotencyHeader)
	if key == "" {
		return "", nil
	}
	if len(key) > maxKeyLength {
		return "", manent.Errorf(manent.EInvalid, "%s is longer than %d characters", idempotencyHeader, maxKeyLength)
	}
	for _, c := range key {
		if c > unicode.MaxASCII || !unicode.IsPrint(c) {
			return "", manent.Errorf(manent.EInvalid, "%s must be printable ASCII", idempotencyHeader)
		}
	}
	return key, nil
}

func bodyDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// replay answers with the recorded first answer to key, if there is one,
// and reports whether it did (or refused a different body).
func (s *Server) replay(w http.ResponseWriter, r *http.Request, p manent.Identity, key string, body []byte) bool {
	rec, err := s.st.Idempotent(r.Context(), p.Subject, key)
	if err != nil {
		writeError(w, r, s.log, err)
		return true
	}
	if rec == nil {
		return false
	}
	if rec.BodySHA256 != bodyDigest(body) {
		writeError(w, r, s.log, manent.Errorf(manent.EInvalid,
			"%s %q was already used by %s within 24h for a different request body; use a new key for a new request",
			idempotencyHeader, key, p.Subject))
		return true
	}
	var res api.SubmitResult
	if json.Unmarshal(rec.Response, &res) == nil {
		if res.ID != "" {
			w.Header().Set("Location", "/api/v1/deployments/"+res.ID)
		} else if res.Schedule != "" {
			w.Header().Set("Location", "/api/v1/schedules/"+res.Schedule)
		}
	}
	w.Header().Set(replayedHeader, "true")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rec.Status)
	_, _ = w.Write(rec.Response)
	return true
}

// recordIdempotency records the answer to key in tx (res is the answer's
// JSON document: an api.SubmitResult, or an api.RollbackResult).
func (s *Server) recordIdempotency(ctx context.Context, tx *sql.Tx, p manent.Identity, key string, body []byte, status int, res any) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return s.st.RecordIdempotency(ctx, tx, store.Idempotency{Identity: p.Subject, Key: key, BodySHA256: bodyDigest(body),
		Status: status, Response: append(b, '\n')})
}

// rollbackDigestBody is what a rollback's Idempotency-Key is bound to: the
// route (application and environment) and the body. Two rollbacks of
// different environments with the same key and an empty body are different
// requests (422 for the second), and so is a submission with that key.
func rollbackDigestBody(r *http.Request, body []byte) []byte {
	return append([]byte(r.Method+" "+r.URL.EscapedPath()+"\n"), body...)
}
