package store_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/store"
)

// TestMigrateRefusesNewerSchema: a database a newer release migrated (it
// holds a migration this build does not embed) is refused, with both
// versions in the message, and this build writes nothing to it; migrating
// again a database this build knows is a no-op.
func TestMigrateRefusesNewerSchema(t *testing.T) {
	for name, url := range map[string]func(testing.TB) string{"sqlite": enginetest.SQLite, "postgres": enginetest.Postgres} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t, url(t))
			if err := st.Migrate(ctx); err != nil {
				t.Fatalf("migrating an up-to-date database again: %v", err)
			}
			var known int
			if err := st.DB().QueryRowContext(ctx, `SELECT MAX(version) FROM manent_schema_migrations`).Scan(&known); err != nil {
				t.Fatal(err)
			}
			newer := known + 1
			if _, err := st.DB().ExecContext(ctx, `INSERT INTO manent_schema_migrations (version) VALUES (`+strconv.Itoa(newer)+`)`); err != nil {
				t.Fatal(err)
			}
			// A migration this build knows, forgotten: Migrate must not
			// apply it under a newer schema either.
			if _, err := st.DB().ExecContext(ctx, `DELETE FROM manent_schema_migrations WHERE version = `+strconv.Itoa(known)); err != nil {
				t.Fatal(err)
			}
			err := st.Migrate(ctx)
			if !errors.Is(err, store.ErrSchemaNewer) {
				t.Fatalf("Migrate on a newer schema: %v, want ErrSchemaNewer", err)
			}
			for _, want := range []string{"schema version " + strconv.Itoa(newer), "knows up to " + strconv.Itoa(known)} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			var n int
			if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM manent_schema_migrations WHERE version = `+strconv.Itoa(known)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("the refused Migrate applied migration %d", known)
			}
		})
	}
}
