package servercmd

import "testing"

// MANENT_DATABASE configures the database (the Helm chart passes the DSN
// so, from a Secret, never as an argument); --database wins over it.
func TestDatabaseFromEnvironment(t *testing.T) {
	const dsn = "postgres://manent:secret@db.internal:5432/manent"
	t.Setenv("MANENT_DATABASE", dsn)
	c, err := loadConfig("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Database != dsn {
		t.Fatalf("database %q, want %q from MANENT_DATABASE", c.Database, dsn)
	}
	c, err = loadConfig("", map[string]string{"database": "sqlite:/tmp/x.db"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Database != "sqlite:/tmp/x.db" {
		t.Fatalf("database %q, want the flag's", c.Database)
	}
}
