package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
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
	// ClientAddr and UserAgent name the client of the request that made
	// the entry (WithClient), "" when no request did or the entry is older
	// than migration 28.
	ClientAddr string `json:"client_addr,omitempty"`
	UserAgent  string `json:"user_agent,omitempty"`
	PrevHash   string `json:"prev_hash"`
	Hash       string `json:"hash"`
}

// auditHash is the chain hash of an entry: sha256 over the previous hash and
// the entry's fields, each length-prefixed so no two entries collide. The
// client's address and user agent are covered when either is set: an entry
// written before they were recorded (migration 28) has neither and hashes
// as it did, and one that has them cannot lose them unseen (its nine-field
// hash differs from the eleven-field one it was written with).
func auditHash(e AuditEntry) string {
	h := sha256.New()
	fields := []string{e.PrevHash, fmt.Sprint(e.Seq), fmtTime(e.Time), e.Identity, e.Action, e.Target, e.RequestID, e.Outcome, e.Detail}
	if e.ClientAddr != "" || e.UserAgent != "" {
		fields = append(fields, e.ClientAddr, e.UserAgent)
	}
	for _, f := range fields {
		fmt.Fprintf(h, "%d:%s;", len(f), f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// The bounds of an audit entry's client: an address (IPv6 with a zone is
// at most 46 bytes) and a User-Agent, which a client writes as it likes.
const (
	MaxAuditClientAddr = 64
	MaxAuditUserAgent  = 256
)

type auditClientKey struct{}

type auditClient struct{ addr, userAgent string }

// WithClient returns ctx naming the client of the request it serves: the
// audit entries appended with it (or a context derived from it) record
// addr and userAgent, made single-line text and bounded
// (MaxAuditClientAddr, MaxAuditUserAgent).
func WithClient(ctx context.Context, addr, userAgent string) context.Context {
	return context.WithValue(ctx, auditClientKey{}, auditClient{addr: clientText(addr, MaxAuditClientAddr), userAgent: clientText(userAgent, MaxAuditUserAgent)})
}

// ClientOf returns the client ctx names (WithClient), ok false when none.
func ClientOf(ctx context.Context) (addr, userAgent string, ok bool) {
	c, ok := ctx.Value(auditClientKey{}).(auditClient)
	return c.addr, c.userAgent, ok
}

// clientText is s as one line of UTF-8 text — each byte that is not UTF-8
// and each control character a U+FFFD — of at most max bytes, clipped
// with "…".
func clientText(s string, max int) string {
	if len(s) > 4*max {
		s = s[:4*max] // what is read below is bounded whatever was sent
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, "\ufffd"))
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
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
	if c, ok := ctx.Value(auditClientKey{}).(auditClient); ok && e.ClientAddr == "" && e.UserAgent == "" {
		e.ClientAddr, e.UserAgent = c.addr, c.userAgent
	}
	e.ClientAddr, e.UserAgent = clientText(e.ClientAddr, MaxAuditClientAddr), clientText(e.UserAgent, MaxAuditUserAgent)
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Time = e.Time.UTC().Truncate(time.Nanosecond)
	e.Hash = auditHash(e)
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO manent_audit (seq, time, identity, action, target, request_id, outcome, detail, client_addr, user_agent, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`), e.Seq, fmtTime(e.Time), e.Identity, e.Action, e.Target, e.RequestID, e.Outcome, e.Detail,
		e.ClientAddr, e.UserAgent, e.PrevHash, e.Hash); err != nil {
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
	query := `SELECT seq, time, identity, action, target, request_id, outcome, detail, client_addr, user_agent, prev_hash, hash FROM manent_audit WHERE 1=1`
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
	err := rows.Scan(&e.Seq, &at, &e.Identity, &e.Action, &e.Target, &e.RequestID, &e.Outcome, &e.Detail, &e.ClientAddr, &e.UserAgent, &e.PrevHash, &e.Hash)
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
// deleted row (and a deleted tail, through the head), once, at the row
// where it shows. It returns the number of rows checked. Rows deleted at
// the end with the head moved back, or a chain rewritten from an edited
// row on, verify: whoever can write the table can write the head. An
// anchor kept elsewhere sees them (CheckAuditAnchor).
func (s *Store) VerifyAudit(ctx context.Context) (int64, []AuditProblem, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT seq, time, identity, action, target, request_id, outcome, detail, client_addr, user_agent, prev_hash, hash FROM manent_audit ORDER BY seq`)
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
		// One problem per break, at the row where it shows: rows missing
		// before this one also break its previous hash, which is not a
		// second problem.
		switch {
		case e.Seq != want && e.Seq == want+1:
			problems = append(problems, AuditProblem{Seq: e.Seq, Problem: fmt.Sprintf("row %d is missing (deleted)", want)})
		case e.Seq != want:
			problems = append(problems, AuditProblem{Seq: e.Seq, Problem: fmt.Sprintf("rows %d to %d are missing (deleted)", want, e.Seq-1)})
		case e.PrevHash != prev && e.Seq == 1:
			problems = append(problems, AuditProblem{Seq: e.Seq, Problem: "the first row names a previous hash: rows before it were deleted, or it was edited"})
		case e.PrevHash != prev:
			problems = append(problems, AuditProblem{Seq: e.Seq, Problem: fmt.Sprintf(
				"its previous hash is not row %d's hash: row %d was edited and its hash recomputed, or row %d was inserted", e.Seq-1, e.Seq-1, e.Seq)})
		}
		if auditHash(e) != e.Hash {
			problems = append(problems, AuditProblem{Seq: e.Seq, Problem: "its hash does not match its content: the row was edited"})
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
	last := want - 1
	switch {
	case headSeq > last:
		problems = append(problems, AuditProblem{Seq: headSeq, Problem: fmt.Sprintf("the chain ends at row %d but the head names row %d: rows %d to %d at the end were deleted", last, headSeq, last+1, headSeq)})
	case headSeq < last:
		problems = append(problems, AuditProblem{Seq: last, Problem: fmt.Sprintf("the chain goes on to row %d but the head names row %d: rows %d to %d were added without the server, or the head was edited", last, headSeq, headSeq+1, last)})
	case headHash != prev:
		problems = append(problems, AuditProblem{Seq: last, Problem: fmt.Sprintf("the head names row %d with another hash: row %d was edited and its hash recomputed, or the head was edited", last, last)})
	}
	return n, problems, nil
}

// AuditAnchor is one row of the audit chain, its number and hash, kept
// outside the database (verify-audit prints the last one): whoever can
// write the audit table can also delete rows at its end and move the head
// back, or rewrite the chain from an edited row on, and the chain alone
// then verifies; the row of an anchor must still be there with its hash.
type AuditAnchor struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

func (a AuditAnchor) String() string { return fmt.Sprintf("%d:%s", a.Seq, a.Hash) }

// AuditLast returns the chain's last row as an anchor (seq 0 for an empty
// log).
func (s *Store) AuditLast(ctx context.Context) (AuditAnchor, error) {
	var a AuditAnchor
	err := s.rdb.QueryRowContext(ctx, `SELECT seq, hash FROM manent_audit ORDER BY seq DESC LIMIT 1`).Scan(&a.Seq, &a.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		return AuditAnchor{}, nil
	}
	return a, err
}

// CheckAuditAnchor says what is wrong with the chain against an anchor
// kept from an earlier verify-audit: "" when its row is there with its
// hash.
func (s *Store) CheckAuditAnchor(ctx context.Context, a AuditAnchor) (string, error) {
	var hash string
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT hash FROM manent_audit WHERE seq = ?`), a.Seq).Scan(&hash)
	if errors.Is(err, sql.ErrNoRows) {
		last, err := s.AuditLast(ctx)
		if err != nil {
			return "", err
		}
		if last.Seq < a.Seq {
			return fmt.Sprintf("the chain ends at row %d, before the anchor's row %d: rows at the end were deleted and the head moved back", last.Seq, a.Seq), nil
		}
		return fmt.Sprintf("the anchor's row %d is missing (deleted)", a.Seq), nil
	}
	if err != nil {
		return "", err
	}
	if hash != a.Hash {
		return fmt.Sprintf("row %d's hash is not the anchor's: the chain was rewritten at or before row %d (its hash is %s, the anchor's %s)", a.Seq, a.Seq, hash, a.Hash), nil
	}
	return "", nil
}

// auditJSON renders a value as the compact JSON of an audit detail.
func auditJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
