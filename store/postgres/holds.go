package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/loopbot/loopbot/bot"
)

// Holds (bot.HoldStore) are a bucket of the records table, keyed by pace key, so that the
// replica that leads the outbox next honours the Retry-After the last one heard. A hold is
// written by the leader alone, so a put upserts.
const bucketHolds = "holds"

var _ bot.HoldStore = (*DB)(nil)

func (db *DB) PutHold(ctx context.Context, h bot.Hold) error {
	if err := bot.CheckHold(h); err != nil {
		return fmt.Errorf("put hold: %w", err)
	}
	err := db.do(ctx, true, func(t *tx) error {
		return putRecord(t, bucketHolds, h.Key, "hold", &h)
	})
	if err != nil {
		return fmt.Errorf("put hold %s: %w", h.Key, err)
	}
	return nil
}

func (db *DB) Holds(ctx context.Context) ([]bot.Hold, error) {
	var out []bot.Hold
	err := db.do(ctx, false, func(t *tx) error {
		holds, err := scan[bot.Hold](t, bucketHolds, "hold",
			"SELECT key, data FROM records WHERE bucket = $1 ORDER BY key", bucketHolds)
		out = nil
		for _, h := range holds {
			out = append(out, *h)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list holds: %w", err)
	}
	return out, nil
}

func (db *DB) ClearHold(ctx context.Context, h bot.Hold) error {
	err := db.do(ctx, true, func(t *tx) error {
		stored, err := getRecord[bot.Hold](t, bucketHolds, h.Key, "hold")
		switch {
		case errors.Is(err, bot.ErrNotFound):
			return nil
		case err != nil:
			return err
		case !stored.Until.Equal(h.Until):
			return nil // a newer hold
		}
		_, err = t.exec("DELETE FROM records WHERE bucket = $1 AND key = $2", bucketHolds, h.Key)
		return err
	})
	if err != nil {
		return fmt.Errorf("clear hold %s: %w", h.Key, err)
	}
	return nil
}
