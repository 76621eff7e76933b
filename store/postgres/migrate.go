package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Migrations.
//
// The schema is a numbered list of SQL files, migrations/NNNN_name.sql, embedded in the
// binary. schema_migrations holds the version of each that has run. Open runs those a
// database lacks, each in a transaction of its own together with its row in
// schema_migrations, so a migration that fails leaves the database as it was. Replicas
// started together would run the same migration at once, so Open holds an advisory lock
// (one key, the same for every loopbot) while it looks and migrates; the second replica
// waits, then finds nothing left to do. A database migrated by a newer loopbot is refused
// (ErrSchema) rather than misread.

//go:embed migrations/*.sql
var migrationFiles embed.FS

// ErrSchema is returned by Open when the database's schema is newer than this loopbot.
var ErrSchema = errors.New("unsupported database schema")

// migrationLock is the advisory lock key Open holds while it migrates: "loopbot" in ASCII.
const migrationLock int64 = 0x6c6f6f70626f74

type migration struct {
	version int
	name    string
	sql     string
}

// migrations lists the embedded migrations in version order, checking that the versions
// are 1, 2, 3 and so on.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %s is not named NNNN_name.sql", e.Name())
		}
		data, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(data)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %d (%s) is out of sequence", m.version, m.name)
		}
	}
	return out, nil
}

// SchemaVersion is the version of the newest migration this loopbot carries.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrate brings the database's schema up to SchemaVersion under the advisory lock.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	// A session lock, held across the migrations' transactions, on this connection.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return fmt.Errorf("lock for migration: %w", err)
	}
	defer func() {
		// A connection that cannot unlock is closed, which unlocks.
		if _, err := conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", migrationLock); err != nil {
			_ = conn.Conn().Close(context.Background())
		}
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	current, err := schemaVersion(ctx, conn.Conn())
	if err != nil {
		return err
	}
	if latest := ms[len(ms)-1].version; current > latest {
		return fmt.Errorf("%w: version %d is newer than this loopbot supports (%d)", ErrSchema, current, latest)
	}
	for _, m := range ms[current:] {
		err := pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
		}
	}
	return nil
}

// schemaVersion is the highest version in schema_migrations, 0 for none.
func schemaVersion(ctx context.Context, conn *pgx.Conn) (int, error) {
	var v int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// SchemaVersion reads the version the database is at.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("store %s: %w", db.url, err)
	}
	defer conn.Release()
	return schemaVersion(ctx, conn.Conn())
}

// Probe connects to the database at url and reads its schema version without migrating
// anything, for `loopbot check -online`. A database loopbot never opened is at version 0.
func Probe(ctx context.Context, url string) (version int, err error) {
	secret := urlPassword(url)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, redactErr(fmt.Errorf("connect to %s: %w", RedactURL(url), err), secret)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('schema_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return 0, redactErr(fmt.Errorf("read schema of %s: %w", RedactURL(url), err), secret)
	}
	if !exists {
		return 0, nil
	}
	v, err := schemaVersion(ctx, conn)
	return v, redactErr(err, secret)
}

// checkCurrent fails unless the database is at SchemaVersion.
func checkCurrent(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('schema_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return err
	}
	v := 0
	if exists {
		if v, err = schemaVersion(ctx, conn.Conn()); err != nil {
			return err
		}
	}
	switch want := SchemaVersion(); {
	case v > want:
		return fmt.Errorf("%w: version %d is newer than this loopbot supports (%d)", ErrSchema, v, want)
	case v < want:
		return fmt.Errorf("%w: version %d, and this loopbot writes %d: start loopbot once to migrate it", ErrSchema, v, want)
	}
	return nil
}
