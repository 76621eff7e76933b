package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ClaimEvent records id as seen until now+ttl. It reports true when id was not seen before
// or its earlier claim has expired (a claim is live while now is before its expiry), and
// false for a duplicate within ttl.
func (db *DB) ClaimEvent(ctx context.Context, id string, now time.Time, ttl time.Duration) (bool, error) {
	var first bool
	err := db.do(ctx, true, func(t *tx) error {
		var err error
		first, err = t.ClaimEvent(id, now, ttl)
		return err
	})
	if err != nil {
		return false, err
	}
	return first, nil
}

// ClaimEvent claims id inside the transaction. One statement decides and writes: an insert
// that, on a live claim, changes nothing and returns no row. A concurrent claim of the same
// id waits for the first to commit and then sees it.
func (t *tx) ClaimEvent(id string, now time.Time, ttl time.Duration) (bool, error) {
	if id == "" {
		return false, errors.New("claim event: no id")
	}
	if ttl <= 0 {
		return false, fmt.Errorf("claim event %s: ttl must be positive, got %s", id, ttl)
	}
	expires := now.Add(ttl)
	if err := errors.Join(checkNanoTime(now), checkNanoTime(expires)); err != nil {
		return false, fmt.Errorf("claim event %s: %w", id, err)
	}
	if err := t.check(true); err != nil {
		return false, fmt.Errorf("claim event %s: %w", id, err)
	}
	var got string
	err := t.queryRow(`INSERT INTO events (id, expires_ns) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET expires_ns = EXCLUDED.expires_ns WHERE events.expires_ns <= $3
		RETURNING id`, id, expires.UnixNano(), now.UnixNano()).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if t.note(err) != nil {
		return false, fmt.Errorf("claim event %s: %w", id, err)
	}
	return true, nil
}

// PurgeEvents deletes the claims that expired at or before now and returns how many.
func (db *DB) PurgeEvents(ctx context.Context, now time.Time) (int, error) {
	if err := checkNanoTime(now); err != nil {
		return 0, fmt.Errorf("purge events: %w", err)
	}
	n := 0
	err := db.do(ctx, true, func(t *tx) error {
		deleted, err := t.exec("DELETE FROM events WHERE expires_ns <= $1", now.UnixNano())
		n = int(deleted)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purge events: %w", err)
	}
	return n, nil
}
