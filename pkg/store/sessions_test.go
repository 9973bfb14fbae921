package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/store"
)

func countRevoked(t *testing.T, st *store.Store, where string, args ...any) int {
	t.Helper()
	var n int
	if err := st.ReadDB().QueryRowContext(context.Background(), st.Q(`SELECT COUNT(*) FROM manent_revoked_sessions `+where), args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A revoked session id is reported revoked, others are not (whatever they
// hold); revoking twice is fine; a second store on the same database (a
// second worker) sees the revocation.
func TestRevokeSession(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, url string) {
		ctx := context.Background()
		st := openStore(t, url)
		now := time.Now()
		for _, id := range []string{"abc", "", "' OR 1=1 --", strings.Repeat("x", 64<<10), "\x00\xff"} {
			if revoked, err := st.SessionRevoked(ctx, id); err != nil || revoked {
				t.Fatalf("SessionRevoked(%.20q) on an empty table = %v, %v", id, revoked, err)
			}
		}
		if err := st.RevokeSession(ctx, "", now.Add(time.Hour), now); err == nil {
			t.Fatal("revoking the empty id succeeded")
		}
		for range 2 {
			if err := st.RevokeSession(ctx, "abc", now.Add(time.Hour), now); err != nil {
				t.Fatalf("revoke: %v", err)
			}
		}
		if revoked, err := st.SessionRevoked(ctx, "abc"); err != nil || !revoked {
			t.Fatalf("SessionRevoked(abc) = %v, %v, want true", revoked, err)
		}
		for _, id := range []string{"abd", "ABC", "abc ", "' OR 1=1 --"} {
			if revoked, err := st.SessionRevoked(ctx, id); err != nil || revoked {
				t.Fatalf("SessionRevoked(%q) = %v, %v, want false", id, revoked, err)
			}
		}
		if n := countRevoked(t, st, ""); n != 1 {
			t.Fatalf("%d rows after revoking one id twice", n)
		}
		if !st.Postgres() {
			return // one server owns a SQLite file
		}
		other := openStore(t, url)
		if revoked, err := other.SessionRevoked(ctx, "abc"); err != nil || !revoked {
			t.Fatalf("another worker: SessionRevoked(abc) = %v, %v, want true", revoked, err)
		}
	})
}

// Each revocation prunes a bounded batch of expired ones (their sessions
// ended anyway); live ones stay.
func TestRevokeSessionPrunesExpired(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, url string) {
		ctx := context.Background()
		st := openStore(t, url)
		now := time.Now()
		// 150 sessions that ended at now-150s … now-1s, revoked long ago
		// (each insert can only prune older ones: none yet).
		past := now.Add(-24 * time.Hour)
		for i := 150; i >= 1; i-- {
			if err := st.RevokeSession(ctx, fmt.Sprintf("old-%03d", i), now.Add(-time.Duration(i)*time.Second), past); err != nil {
				t.Fatal(err)
			}
		}
		if n := countRevoked(t, st, ""); n != 150 {
			t.Fatalf("%d rows, want 150 (nothing had expired as of their revocation)", n)
		}
		if err := st.RevokeSession(ctx, "live-1", now.Add(time.Hour), now); err != nil {
			t.Fatal(err)
		}
		if n := countRevoked(t, st, "WHERE expires_at < ?", now.Unix()); n != 50 {
			t.Fatalf("%d expired rows after one revocation, want 50 (a batch of 100 pruned, oldest first)", n)
		}
		if n := countRevoked(t, st, "WHERE id IN (?, ?)", store.SessionKey("old-001"), store.SessionKey("old-050")); n != 2 {
			t.Fatalf("the most recently expired were pruned first (%d of old-001, old-050 left)", n)
		}
		if err := st.RevokeSession(ctx, "live-2", now.Add(time.Hour), now); err != nil {
			t.Fatal(err)
		}
		if n := countRevoked(t, st, ""); n != 2 {
			t.Fatalf("%d rows after the second revocation, want the 2 live ones", n)
		}
		for _, id := range []string{"live-1", "live-2"} {
			if revoked, err := st.SessionRevoked(ctx, id); err != nil || !revoked {
				t.Fatalf("SessionRevoked(%s) = %v, %v", id, revoked, err)
			}
		}
	})
}

// BenchmarkSessionRevoked measures the check every web request with a
// session makes, with 10,000 revoked sessions in the table, on SQLite (the
// read pool) and PostgreSQL.
//
// Run: go test ./pkg/store -run '^$' -bench SessionRevoked
func BenchmarkSessionRevoked(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		b.Run(db, func(b *testing.B) {
			url := enginetest.SQLite(b)
			if db == "postgres" {
				url = enginetest.Postgres(b)
			}
			st, err := store.Open(context.Background(), url)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			ctx := context.Background()
			if err := st.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			err = st.Tx(ctx, func(tx *sql.Tx) error {
				for i := range 10_000 {
					if _, err := tx.ExecContext(ctx, st.Q(`INSERT INTO manent_revoked_sessions (id, expires_at, revoked_at) VALUES (?, ?, ?)`),
						store.SessionKey(fmt.Sprint("s", i)), now.Add(time.Hour).Unix(), now.Unix()); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				revoked, err := st.SessionRevoked(ctx, fmt.Sprint("s", i%20_000))
				if err != nil || revoked != (i%20_000 < 10_000) {
					b.Fatalf("SessionRevoked(s%d) = %v, %v", i%20_000, revoked, err)
				}
			}
		})
	}
}
