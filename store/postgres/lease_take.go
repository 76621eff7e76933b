package postgres

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loopbot/loopbot/bot"
)

var _ bot.LeaseTaker = (*tx)(nil)

// TakeLease leases a run inside the transaction with ClaimRuns' upsert for one run: it takes
// the next epoch only if the stored lease is not live, a check made on the latest row, so a
// replica that claimed the run first keeps it.
func (t *tx) TakeLease(runID, owner string, now time.Time, ttl time.Duration) (bot.Lease, bool, error) {
	if err := t.check(true); err != nil {
		return bot.Lease{}, false, fmt.Errorf("take lease of run %s: %w", runID, err)
	}
	if err := bot.CheckClaim(owner, 1, ttl); err != nil {
		return bot.Lease{}, false, fmt.Errorf("take lease of run %s: %w", runID, err)
	}
	expires := now.Add(ttl)
	if err := errors.Join(checkNanoTime(now), checkNanoTime(expires)); err != nil {
		return bot.Lease{}, false, fmt.Errorf("take lease of run %s: %w", runID, err)
	}
	var epoch int64
	err := t.queryRow(`
		INSERT INTO run_leases AS l (run_id, owner, epoch, expires_ns) VALUES ($1, $2, 1, $3)
		ON CONFLICT (run_id) DO UPDATE
			SET owner = EXCLUDED.owner, epoch = l.epoch + 1, expires_ns = EXCLUDED.expires_ns
			WHERE l.owner = '' OR l.expires_ns <= $4
		RETURNING epoch`,
		runID, owner, expires.UnixNano(), now.UnixNano()).Scan(&epoch)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return bot.Lease{}, false, nil // live: another replica holds it
	case t.note(err) != nil:
		return bot.Lease{}, false, fmt.Errorf("take lease of run %s: %w", runID, err)
	}
	return bot.Lease{RunID: runID, Owner: owner, Epoch: epoch, Expires: expires}, true, nil
}
