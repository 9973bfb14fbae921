package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// AuditEntry is one row of the audit log.
type AuditEntry struct {
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	Identity  string    `json:"identity"`
	Action    string    `json:"action"`
	Target    string    `json:"target"`
	RequestID string    `json:"request_id"`
	Outcome   string    `json:"outcome"`
	Detail    string    `json:"detail,omitempty"`
	PrevHash  string    `json:"prev_hash"`
	Hash      string    `json:"hash"`
}

// auditHash is the chain hash of an entry: sha256 over the previous hash and
// the entry's fields, each length-prefixed so no two entries collide.
func auditHash(e AuditEntry) string {
	h := sha256.New()
	for _, f := range []string{e.PrevHash, fmt.Sprint(e.Seq), fmtTime(e.Time), e.Identity, e.Action, e.Target, e.RequestID, e.Outcome, e.Detail} {
		fmt.Fprintf(h, "%d:%s;", len(f), f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// AppendAudit appends an entry to the audit log.
func (s *Store) AppendAudit(ctx context.Context, e AuditEntry) error {
	return s.Tx(ctx, func(tx *sql.Tx) error { return s.appendAudit(ctx, tx, e) })
}

// AppendAuditTx appends an entry in tx, so that the entry and what it
// records commit together. On PostgreSQL the chain's head stays locked until
// tx ends: append last.
func (s *Store) AppendAuditTx(ctx context.Context, tx *sql.Tx, e AuditEntry) error {
	return s.appendAudit(ctx, tx, e)
}

func (s *Store) appendAudit(ctx context.Context, tx *sql.Tx, e AuditEntry) error {
	lock := ""
	if s.postgres {
		lock = " FOR UPDATE" // one writer at a time extends the chain
	}
	var seq int64
	var prev string
	if err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM manent_audit_head WHERE id = 1`+lock).Scan(&seq, &prev); err != nil {
		return fmt.Errorf("audit head: %w", err)
	}
	e.Seq, e.PrevHash = seq+1, prev
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Time = e.Time.UTC().Truncate(time.Nanosecond)
	e.Hash = auditHash(e)
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_audit (seq, time, identity, action, target, request_id, outcome, detail, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`), e.Seq, fmtTime(e.Time), e.Identity, e.Action, e.Target, e.RequestID, e.Outcome, e.Detail, e.PrevHash, e.Hash); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	_, err := tx.ExecContext(ctx, s.q(`UPDATE manent_audit_head SET seq = ?, hash = ? WHERE id = 1`), e.Seq, e.Hash)
	return err
}

// AuditFilter selects audit entries: newest first, before a seq.
type AuditFilter struct {
	Action string
	Before int64
	Limit  int
}

// Audit returns audit entries newest first.
func (s *Store) Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 100
	}
	query := `SELECT seq, time, identity, action, target, request_id, outcome, detail, prev_hash, hash FROM manent_audit WHERE 1=1`
	var args []any
	if f.Action != "" {
		query += " AND action = ?"
		args = append(args, f.Action)
	}
	if f.Before > 0 {
		query += " AND seq < ?"
		args = append(args, f.Before)
	}
	query += fmt.Sprintf(" ORDER BY seq DESC LIMIT %d", f.Limit)
	rows, err := s.rdb.QueryContext(ctx, s.q(query), s.planned(args)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func scanAudit(rows *sql.Rows) (AuditEntry, error) {
	var e AuditEntry
	var at string
	err := rows.Scan(&e.Seq, &at, &e.Identity, &e.Action, &e.Target, &e.RequestID, &e.Outcome, &e.Detail, &e.PrevHash, &e.Hash)
	if t := parseTime(sql.NullString{String: at, Valid: true}); t != nil {
		e.Time = *t
	}
	return e, err
}

// AuditProblem is one break of the audit chain.
type AuditProblem struct {
	Seq     int64  `json:"seq"`
	Problem string `json:"problem"`
}

// VerifyAudit walks the whole chain and reports every edited, inserted or
// deleted row (and a deleted tail, through the head). It returns the number
// of rows checked.
func (s *Store) VerifyAudit(ctx context.Context) (int64, []AuditProblem, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT seq, time, identity, action, target, request_id, outcome, detail, prev_hash, hash FROM manent_audit ORDER BY seq`)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	var problems []AuditProblem
	var n, want int64 = 0, 1
	prev := ""
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return n, nil, err
		}
		n++
		if e.Seq != want {
			problems = append(problems, AuditProblem{Seq: e.Seq, Problem: fmt.Sprintf("rows %d to %d are missing", want, e.Seq-1)})
		}
		if e.PrevHash != prev {
			problems = append(problems, AuditProblem{Seq: e.Seq, Problem: "previous hash does not match the row before it (a row was deleted or inserted)"})
		}
		if auditHash(e) != e.Hash {
			problems = append(problems, AuditProblem{Seq: e.Seq, Problem: "hash does not match the row's content (the row was edited)"})
		}
		prev, want = e.Hash, e.Seq+1
	}
	if err := rows.Err(); err != nil {
		return n, nil, err
	}
	var headSeq int64
	var headHash string
	if err := s.rdb.QueryRowContext(ctx, `SELECT seq, hash FROM manent_audit_head WHERE id = 1`).Scan(&headSeq, &headHash); err != nil {
		return n, nil, err
	}
	if headSeq != want-1 || headHash != prev {
		problems = append(problems, AuditProblem{Seq: headSeq, Problem: fmt.Sprintf("the chain ends at row %d but the head says %d (rows at the end were deleted)", want-1, headSeq)})
	}
	return n, problems, nil
}

// auditJSON renders a value as the compact JSON of an audit detail.
func auditJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
