package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// Leaderships (bot.Elector) are a bucket of the records table, keyed by role: the row is
// read FOR UPDATE, so two replicas electing at once take turns, and the first election of
// a role inserts, so the second of two first elections fails with a unique violation and
// runs again, finding the first's leadership.
const bucketLeaders = "leaders"

var _ bot.Elector = (*DB)(nil)

func (db *DB) Lead(ctx context.Context, role, owner string, now time.Time, ttl time.Duration) (bot.Leadership, error) {
	if err := bot.CheckLead(role, owner, ttl); err != nil {
		return bot.Leadership{}, fmt.Errorf("lead %s: %w", role, err)
	}
	var out bot.Leadership
	err := db.do(ctx, true, func(t *tx) error {
		var stored bot.Leadership
		got, err := getRecord[bot.Leadership](t, bucketLeaders, role, "leadership")
		switch {
		case err == nil:
			stored = *got
		case !errors.Is(err, bot.ErrNotFound):
			return err
		}
		next, changed := bot.NextLeadership(stored, role, owner, now, ttl)
		out = next
		if !changed {
			return nil
		}
		return putRecord(t, bucketLeaders, role, "leadership", &next)
	})
	if err != nil {
		return bot.Leadership{}, fmt.Errorf("lead %s: %w", role, err)
	}
	return out, nil
}

func (db *DB) Resign(ctx context.Context, role, owner string) error {
	err := db.do(ctx, true, func(t *tx) error {
		got, err := getRecord[bot.Leadership](t, bucketLeaders, role, "leadership")
		if errors.Is(err, bot.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if got.Owner != owner {
			return nil
		}
		got.Owner, got.Expires = "", time.Unix(0, 0).UTC()
		return putRecord(t, bucketLeaders, role, "leadership", got)
	})
	if err != nil {
		return fmt.Errorf("resign %s: %w", role, err)
	}
	return nil
}
