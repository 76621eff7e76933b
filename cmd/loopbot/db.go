package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/loopbot/loopbot/store"
	"github.com/loopbot/loopbot/store/postgres"
)

// db runs the database's maintenance commands, which need the file to themselves:
// `db check` runs bbolt's consistency check and the store's own over the file, read-only,
// and lists the quarantine; `db compact` packs it with bbolt's compaction, keeping the
// original beside it.
func (m *Main) db(ctx context.Context) error {
	if m.Config.Store.Backend == backendPostgres {
		return m.dbPostgres(ctx)
	}
	path := m.Config.Store.Path
	timeout := store.WithLockTimeout(time.Duration(m.Config.Store.LockTimeout))
	switch m.args[0] {
	case "check":
		r, err := store.CheckFile(ctx, path, timeout)
		if err != nil {
			return stopFirst(err)
		}
		return writeCheck(m, r)
	case "compact":
		c, err := store.Compact(ctx, path, timeout)
		if err != nil {
			return stopFirst(err)
		}
		_, err = fmt.Fprintf(m.Stdout, "compacted %s: %d bytes, was %d; the original is kept at %s\n", path, c.After, c.Before, c.Backup)
		return err
	}
	return fmt.Errorf("unknown db command %q", m.args[0])
}

// stopFirst says what to do when the database is held by a running loopbot.
func stopFirst(err error) error {
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("%w: stop it first, this command needs the file to itself", err)
	}
	return err
}

// writeCheck prints what CheckFile found and fails if the file has problems. Quarantined
// records are listed by where they were and why, not by what they held, which may be
// anything a thread said.
func writeCheck(m *Main, r *store.Report) error {
	fmt.Fprintf(m.Stdout, "database: %s (%d bytes)\n", r.Path, r.Size)
	for _, p := range r.Problems {
		fmt.Fprintf(m.Stdout, "problem: %s\n", oneLine(p.Error(), 300))
	}
	if len(r.Quarantined) > 0 {
		fmt.Fprintf(m.Stdout, "quarantined: %d records did not decode; the bot went on without them:\n", len(r.Quarantined))
		tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  BUCKET\tKEY\tAT\tREASON")
		for _, q := range r.Quarantined {
			fmt.Fprintf(tw, "  %s\t%q\t%s\t%s\n", q.Bucket, q.Key, q.At.UTC().Format(time.RFC3339), oneLine(q.Reason, 100))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Problems) > 0 {
		return fmt.Errorf("%s: %d problems: %w; keep a copy of the file, then restore it from a backup or move it aside to start with an empty database",
			r.Path, len(r.Problems), store.ErrDamaged)
	}
	_, err := fmt.Fprintln(m.Stdout, "ok")
	return err
}

// quarantined reports a record the store moved aside because it did not decode: an error
// in the log, and a count in /metrics to alert on.
func quarantined(log *slog.Logger, met *metrics, q store.Quarantined) {
	met.quarantined.WithLabelValues(q.Bucket).Inc()
	log.Error("store: a record did not decode and was moved to the quarantine; the bot goes on without it (loopbot db check lists it)",
		"bucket", q.Bucket, "key", fmt.Sprintf("%q", q.Key), "reason", q.Reason)
}

// dbPostgres runs the maintenance commands on PostgreSQL, which needs no one to stop: `db
// check` verifies the schema version and that every record decodes and counts the
// quarantine. There is no `db compact`: PostgreSQL reclaims space itself (autovacuum).
func (m *Main) dbPostgres(ctx context.Context) error {
	if m.args[0] == "compact" {
		return errors.New("db compact is for the bbolt file: PostgreSQL reclaims space itself (autovacuum, or VACUUM by its administrator)")
	}
	if m.args[0] != "check" {
		return fmt.Errorf("unknown db command %q", m.args[0])
	}
	db, err := postgres.Open(ctx, m.Config.Store.URL, postgres.WithoutMigration())
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Check(ctx); err != nil {
		return err
	}
	n, err := db.QuarantineCount(ctx)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(m.Stdout, "%s: schema version %d, every record decodes, %d quarantined\nok\n", db.URL(), postgres.SchemaVersion(), n)
	return err
}
