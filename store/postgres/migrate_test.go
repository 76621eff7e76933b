package postgres

import (
	"errors"
	"sync"
	"testing"

	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// TestMigrateTogether starts five replicas on one new database at once: the advisory lock
// lets one migrate while the others wait, so each opens, and each migration ran once.
func TestMigrateTogether(t *testing.T) {
	url := pgtest.URL(t)
	var wg sync.WaitGroup
	errs := make([]error, 5)
	dbs := make([]*DB, 5)
	for i := range dbs {
		wg.Go(func() { dbs[i], errs[i] = Open(t.Context(), url) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		defer dbs[i].Close()
	}
	var n, v int
	if err := dbs[0].pool.QueryRow(t.Context(), "SELECT count(*), max(version) FROM schema_migrations").Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != SchemaVersion() || v != SchemaVersion() {
		t.Errorf("schema_migrations holds %d rows up to version %d, want each of %d once", n, v, SchemaVersion())
	}
	got, err := dbs[3].SchemaVersion(t.Context())
	if err != nil || got != SchemaVersion() {
		t.Errorf("SchemaVersion = %d, %v; want %d", got, err, SchemaVersion())
	}
}

// TestNewerSchemaRefused opens a database a newer loopbot migrated: Open refuses it and
// changes nothing.
func TestNewerSchemaRefused(t *testing.T) {
	url := pgtest.URL(t)
	db, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	next := SchemaVersion() + 1
	if _, err := db.pool.Exec(t.Context(), "INSERT INTO schema_migrations (version, name) VALUES ($1, 'from the future')", next); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = Open(t.Context(), url)
	if !errors.Is(err, ErrSchema) {
		t.Fatalf("Open of a newer schema: got %v, want ErrSchema", err)
	}
}

func TestMigrationsInSequence(t *testing.T) {
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatal("no migrations embedded")
	}
}

// TestWithoutMigration opens a database with WithoutMigration: a new one is refused and
// left without a schema, a current one opens.
func TestWithoutMigration(t *testing.T) {
	url := pgtest.URL(t)
	if _, err := Open(t.Context(), url, WithoutMigration()); !errors.Is(err, ErrSchema) {
		t.Fatalf("Open without migration of a new database: got %v, want ErrSchema", err)
	}
	if v, err := Probe(t.Context(), url); err != nil || v != 0 {
		t.Errorf("after the refused open the database is at version %d, %v; want none", v, err)
	}
	db, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(t.Context(), url, WithoutMigration())
	if err != nil {
		t.Fatalf("Open without migration of a current database: %v", err)
	}
	db.Close()
}
