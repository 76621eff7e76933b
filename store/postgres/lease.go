package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loopbot/loopbot/bot"
)

// Run leases (bot.Leaser).
//
// ClaimRuns picks the oldest runnable runs without a live lease, locking their runs rows
// FOR UPDATE SKIP LOCKED, so that replicas claiming at once each take different runs instead
// of queueing behind one another; then it writes each lease with an upsert that takes the
// next epoch only if the stored lease is still not live. That second check is what makes
// a claim exclusive: a claimer whose snapshot predates another's committed claim of the
// same run (it found the run unlocked once the other had committed) finds the lease live
// in the upsert, which reads the latest row, and claims nothing.

var _ bot.Leaser = (*DB)(nil)

func (db *DB) ClaimRuns(ctx context.Context, owner string, n int, now time.Time, ttl time.Duration) ([]bot.Lease, error) {
	if err := bot.CheckClaim(owner, n, ttl); err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	expires := now.Add(ttl)
	if err := errors.Join(checkNanoTime(now), checkNanoTime(expires)); err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	statuses := make([]string, len(bot.RunnableStatuses))
	for i, s := range bot.RunnableStatuses {
		statuses[i] = string(s)
	}
	var out []bot.Lease
	err := db.do(ctx, true, func(t *tx) error {
		out = out[:0]
		rows, err := t.query(`
			WITH candidates AS (
				SELECT r.id, r.seq FROM runs r
				WHERE r.status = ANY($1)
				  AND NOT EXISTS (SELECT 1 FROM run_leases l WHERE l.run_id = r.id AND l.owner <> '' AND l.expires_ns > $2)
				ORDER BY r.seq
				LIMIT $3
				FOR UPDATE OF r SKIP LOCKED
			)
			INSERT INTO run_leases AS l (run_id, owner, epoch, expires_ns)
			SELECT id, $4, 1, $5 FROM candidates ORDER BY seq
			ON CONFLICT (run_id) DO UPDATE
				SET owner = EXCLUDED.owner, epoch = l.epoch + 1, expires_ns = EXCLUDED.expires_ns
				WHERE l.owner = '' OR l.expires_ns <= $2
			RETURNING run_id, epoch`,
			statuses, now.UnixNano(), n, owner, expires.UnixNano())
		if t.note(err) != nil {
			return err
		}
		var id string
		var epoch int64
		_, err = pgx.ForEachRow(rows, []any{&id, &epoch}, func() error {
			out = append(out, bot.Lease{RunID: id, Owner: owner, Epoch: epoch, Expires: expires})
			return nil
		})
		return t.note(err)
	})
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	// RETURNING gives no order; the runs' creation order is the claim's.
	if len(out) > 1 {
		order, err := db.runOrder(ctx, out)
		if err != nil {
			return nil, fmt.Errorf("claim runs: %w", err)
		}
		out = order
	}
	return out, nil
}

// runOrder sorts leases by their runs' creation order.
func (db *DB) runOrder(ctx context.Context, leases []bot.Lease) ([]bot.Lease, error) {
	ids := make([]string, len(leases))
	byID := map[string]bot.Lease{}
	for i, l := range leases {
		ids[i] = l.RunID
		byID[l.RunID] = l
	}
	rows, err := db.pool.Query(ctx, "SELECT id FROM runs WHERE id = ANY($1) ORDER BY seq", ids)
	if err != nil {
		return nil, err
	}
	sorted, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := make([]bot.Lease, 0, len(sorted))
	for _, id := range sorted {
		out = append(out, byID[id])
	}
	return out, nil
}

// lockLease reads the run's lease, locking its row until the transaction ends.
func (t *tx) lockLease(runID string) (bot.Lease, error) {
	return t.readLease(runID, t.forUpdate())
}

// RunLease reads the run's lease without locking it: a takeover that commits meanwhile
// is not waited for.
func (t *tx) RunLease(runID string) (bot.Lease, error) {
	if err := t.check(false); err != nil {
		return bot.Lease{RunID: runID}, fmt.Errorf("lease of run %s: %w", runID, err)
	}
	return t.readLease(runID, "")
}

// readLease reads the run's lease, with lock ("" or " FOR UPDATE").
func (t *tx) readLease(runID, lock string) (bot.Lease, error) {
	l := bot.Lease{RunID: runID}
	var ns int64
	err := t.queryRow("SELECT owner, epoch, expires_ns FROM run_leases WHERE run_id = $1"+lock, runID).Scan(&l.Owner, &l.Epoch, &ns)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, fmt.Errorf("lease of run %s: %w", runID, bot.ErrNotFound)
	}
	if t.note(err) != nil {
		return l, err
	}
	l.Expires = time.Unix(0, ns).UTC()
	return l, nil
}

// fence checks inside t that held is the run's current lease.
func (t *tx) fence(held bot.Lease) error {
	stored, err := t.lockLease(held.RunID)
	if errors.Is(err, bot.ErrNotFound) {
		return &bot.FencedError{Held: held, Current: bot.Lease{RunID: held.RunID}}
	}
	if err != nil {
		return err
	}
	return bot.CheckLease(held, stored)
}

func (db *DB) RenewLease(ctx context.Context, l bot.Lease, now time.Time, ttl time.Duration) (bot.Lease, error) {
	if err := bot.CheckClaim(l.Owner, 1, ttl); err != nil {
		return bot.Lease{}, fmt.Errorf("renew lease: %w", err)
	}
	expires := now.Add(ttl)
	if err := checkNanoTime(expires); err != nil {
		return bot.Lease{}, fmt.Errorf("renew lease: %w", err)
	}
	err := db.do(ctx, true, func(t *tx) error {
		if err := t.fence(l); err != nil {
			return err
		}
		return t.write("UPDATE run_leases SET expires_ns = $2 WHERE run_id = $1", l.RunID, expires.UnixNano())
	})
	if err != nil {
		return bot.Lease{}, fmt.Errorf("renew lease: %w", err)
	}
	l.Expires = expires
	return l, nil
}

func (db *DB) ReleaseLease(ctx context.Context, l bot.Lease) error {
	err := db.do(ctx, true, func(t *tx) error {
		if err := t.fence(l); err != nil {
			return err
		}
		return t.write(releaseLease, l.RunID)
	})
	if err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	return nil
}

func (db *DB) Lease(ctx context.Context, runID string) (bot.Lease, error) {
	var l bot.Lease
	err := db.do(ctx, false, func(t *tx) error {
		var err error
		l, err = t.lockLease(runID)
		return err
	})
	return l, err
}

// UpdateFenced runs fn as Update does, after checking in the same transaction, with the
// lease's row locked, that l is the run's current lease. A claim that takes the run over
// waits for the lock, so no write under the old epoch can commit after the new one begins.
func (db *DB) UpdateFenced(ctx context.Context, l bot.Lease, fn func(tx bot.Tx) error) error {
	return db.do(ctx, true, func(t *tx) error {
		if err := t.fence(l); err != nil {
			return err
		}
		return fn(t)
	})
}

var _ bot.LeaseReleaser = (*DB)(nil)

// UpdateFencedRelease runs fn as UpdateFenced does and then, in the same transaction,
// releases l as ReleaseLease does.
func (db *DB) UpdateFencedRelease(ctx context.Context, l bot.Lease, fn func(tx bot.Tx) error) error {
	return db.do(ctx, true, func(t *tx) error {
		if err := t.fence(l); err != nil {
			return err
		}
		if err := fn(t); err != nil {
			return err
		}
		return t.write(releaseLease, l.RunID)
	})
}

// releaseLease gives a run up, keeping its epoch for the next claim.
const releaseLease = "UPDATE run_leases SET owner = '', expires_ns = 0 WHERE run_id = $1"
