package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
	"github.com/loopbot/loopbot/store/postgres"
)

// The two store backends: bbolt, one file for one process (the default), and PostgreSQL,
// one database several replicas share. Only this command imports them.
const (
	backendBbolt    = "bbolt"
	backendPostgres = "postgres"
)

// database is the store the daemon runs on, whichever the backend. Both hand runs to
// replicas under leases (bot.Leaser), which the bot does not use yet.
type database interface {
	bot.Store
	bot.Leaser
	// WriteError is why the last write failed on the store's side, nil once one commits.
	WriteError() error
}

// describe names the configured database for messages: the file, or the URL without its
// password.
func (c StoreConfig) describe() string {
	if c.Backend == backendPostgres {
		return "postgres " + postgres.RedactURL(c.URL)
	}
	return c.Path
}

// openDatabase opens the configured store. Records that do not decode are logged and
// counted as they are quarantined.
func openDatabase(ctx context.Context, cfg StoreConfig, log *slog.Logger, met *metrics) (database, error) {
	if cfg.Backend == backendPostgres {
		db, err := postgres.Open(ctx, cfg.URL, postgres.WithQuarantineHook(func(q postgres.Quarantined) {
			quarantined(log, met, store.Quarantined{Bucket: q.Bucket, Key: []byte(q.Key), Reason: q.Reason, At: q.At})
		}))
		if err != nil {
			return nil, err
		}
		v, err := db.SchemaVersion(ctx)
		if err != nil {
			db.Close()
			return nil, err
		}
		log.Info("database connected", "backend", backendPostgres, "url", db.URL(), "schema_version", v)
		return db, nil
	}
	db, err := store.Open(cfg.Path, store.WithLockTimeout(time.Duration(cfg.LockTimeout)), store.WithIntake(),
		store.WithQuarantineHook(func(q store.Quarantined) { quarantined(log, met, q) }))
	if err != nil {
		return nil, err
	}
	if n := db.IntakeReplayed(); n > 0 {
		log.Info("intake journal: acknowledged events moved into the inbox", "count", n)
	}
	return db, nil
}

// probeDatabase is the database's check for `loopbot check -online`: that it answers, and
// its schema version beside the one this loopbot writes. It migrates nothing.
func probeDatabase(ctx context.Context, cfg StoreConfig) (string, error) {
	v, err := postgres.Probe(ctx, cfg.URL)
	if err != nil {
		return "", err
	}
	want := postgres.SchemaVersion()
	switch {
	case v == 0:
		return fmt.Sprintf("connected; no loopbot schema yet (the first start creates version %d)", want), nil
	case v > want:
		return "", fmt.Errorf("schema version %d is newer than this loopbot supports (%d)", v, want)
	case v < want:
		return fmt.Sprintf("connected; schema version %d (the next start migrates it to %d)", v, want), nil
	}
	return fmt.Sprintf("connected; schema version %d", v), nil
}
