package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/loopbot/loopbot/bot"
)

// Run leases (bot.Leaser) in the run_leases bucket: run ID -> bot.Lease as JSON. One
// process holds the file, so claims never race another replica; they are still real leases,
// with epochs that fence a superseded owner, so the bot can use one code path on either
// backend. Writes are serialised, which makes each claim exclusive without more.
//
// The bucket is made by the first claim: a file without it has no leases, and an older
// loopbot ignores it, so it needs no new schema version.
var bucketRunLeases = []byte("run_leases")

var _ bot.Leaser = (*DB)(nil)

func (db *DB) ClaimRuns(ctx context.Context, owner string, n int, now time.Time, ttl time.Duration) ([]bot.Lease, error) {
	if err := bot.CheckClaim(owner, n, ttl); err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	expires := now.Add(ttl)
	var out []bot.Lease
	err := db.update(ctx, func(t *tx) error {
		out = out[:0]
		ids, err := t.RunIDs(bot.RunFilter{Statuses: bot.RunnableStatuses})
		if err != nil {
			return err
		}
		leases, err := t.btx.CreateBucketIfNotExists(bucketRunLeases)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if len(out) == n {
				break
			}
			// The runs are oldest first, and the oldest are the ones already leased: a
			// burst of a thousand runs claimed 32 at a time read every live lease again at
			// each claim. A live one is told from its bytes; only the others are decoded.
			if live, ok := leaseLive(leases.Get([]byte(id)), now); ok && live {
				continue
			}
			l, err := getLease(leases, id)
			if err != nil && !errors.Is(err, bot.ErrNotFound) {
				return err
			}
			if l.Live(now) {
				continue
			}
			l = bot.Lease{RunID: id, Owner: owner, Epoch: l.Epoch + 1, Expires: expires}
			if err := putLease(t, leases, l); err != nil {
				return err
			}
			out = append(out, l)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	return out, nil
}

// leaseLive reports, from a stored lease's bytes, whether it is live at now
// (bot.Lease.Live) without decoding it; ok is false when it cannot tell from them. The
// bytes are putLease's encoding/json of a bot.Lease, whose member names cannot appear
// unescaped inside a string: a quote in a string is written \".
func leaseLive(data []byte, now time.Time) (live, ok bool) {
	const owner, expires = `"owner":"`, `"expires":"`
	o, e := bytes.Index(data, []byte(owner)), bytes.Index(data, []byte(expires))
	if o < 0 || e < 0 || o+len(owner) >= len(data) {
		return false, false
	}
	if data[o+len(owner)] == '"' {
		return false, true // released: no owner
	}
	rest := data[e+len(expires):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return false, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(rest[:end]))
	if err != nil {
		return false, false
	}
	return now.Before(t), true
}

func getLease(b *bolt.Bucket, runID string) (bot.Lease, error) {
	if b == nil {
		return bot.Lease{RunID: runID}, fmt.Errorf("lease of run %s: %w", runID, bot.ErrNotFound)
	}
	data := b.Get([]byte(runID))
	if data == nil {
		return bot.Lease{RunID: runID}, fmt.Errorf("lease of run %s: %w", runID, bot.ErrNotFound)
	}
	l, err := decode[bot.Lease](data, "lease of run "+runID)
	if err != nil {
		return bot.Lease{RunID: runID}, err
	}
	return *l, nil
}

func putLease(t *tx, b *bolt.Bucket, l bot.Lease) error {
	data, err := json.Marshal(&l)
	if err != nil {
		return err
	}
	t.wrote = true
	return b.Put([]byte(l.RunID), data)
}

// fence checks inside t that held is the run's current lease, and returns its bucket.
// heldData, when not nil, is held as putLease encodes it: a stored lease of the same bytes
// is the same lease, which saves decoding it while the write lock is held.
func (t *tx) fence(held bot.Lease, heldData []byte) (*bolt.Bucket, error) {
	if t.closed {
		return nil, ErrTxClosed
	}
	b := t.btx.Bucket(bucketRunLeases)
	if b != nil && heldData != nil && bytes.Equal(b.Get([]byte(held.RunID)), heldData) {
		return b, bot.CheckLease(held, held)
	}
	stored, err := getLease(b, held.RunID)
	if errors.Is(err, bot.ErrNotFound) {
		return nil, &bot.FencedError{Held: held, Current: bot.Lease{RunID: held.RunID}}
	}
	if err != nil {
		return nil, err
	}
	return b, bot.CheckLease(held, stored)
}

func (db *DB) RenewLease(ctx context.Context, l bot.Lease, now time.Time, ttl time.Duration) (bot.Lease, error) {
	if err := bot.CheckClaim(l.Owner, 1, ttl); err != nil {
		return bot.Lease{}, fmt.Errorf("renew lease: %w", err)
	}
	renewed := l
	renewed.Expires = now.Add(ttl)
	err := db.update(ctx, func(t *tx) error {
		b, err := t.fence(l, nil)
		if err != nil {
			return err
		}
		return putLease(t, b, renewed)
	})
	if err != nil {
		return bot.Lease{}, fmt.Errorf("renew lease: %w", err)
	}
	return renewed, nil
}

func (db *DB) ReleaseLease(ctx context.Context, l bot.Lease) error {
	err := db.update(ctx, func(t *tx) error {
		b, err := t.fence(l, nil)
		if err != nil {
			return err
		}
		return releaseIn(t, b, l)
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
		l, err = getLease(t.btx.Bucket(bucketRunLeases), runID)
		return err
	})
	return l, err
}

func (t *tx) RunLease(runID string) (bot.Lease, error) {
	if t.closed {
		return bot.Lease{RunID: runID}, ErrTxClosed
	}
	return getLease(t.btx.Bucket(bucketRunLeases), runID)
}

// UpdateFenced runs fn as Update does, after checking in the same transaction that l is
// the run's current lease.
func (db *DB) UpdateFenced(ctx context.Context, l bot.Lease, fn func(tx bot.Tx) error) error {
	return db.updateFenced(ctx, l, fn, false)
}

// updateFenced is UpdateFenced, which also releases l in the transaction when release is
// set and fn succeeded (UpdateFencedRelease).
func (db *DB) updateFenced(ctx context.Context, l bot.Lease, fn func(tx bot.Tx) error, release bool) error {
	defer db.quarantine()
	// Encoded here, in the caller's goroutine, for fence to compare with the stored lease.
	held, err := json.Marshal(&l)
	if err != nil {
		return fmt.Errorf("update fenced: %w", err)
	}
	return db.update(ctx, func(t *tx) error {
		b, err := t.fence(l, held)
		if err != nil {
			return err
		}
		if err := fn(t); err != nil || !release {
			return err
		}
		return releaseIn(t, b, l)
	})
}

// checkRunLeases checks that every lease decodes, is stored under its run's ID, and names a
// stored run.
func checkRunLeases(btx *bolt.Tx) error {
	leases, ids := btx.Bucket(bucketRunLeases), btx.Bucket(bucketRunIDs)
	if leases == nil {
		return nil // no run was ever claimed
	}
	return leases.ForEach(func(k, v []byte) error {
		l, err := decode[bot.Lease](v, fmt.Sprintf("lease %q", k))
		if err != nil {
			return err
		}
		if l.RunID != string(k) {
			return fmt.Errorf("lease %q is of run %q", k, l.RunID)
		}
		if ids == nil || ids.Get(k) == nil {
			return fmt.Errorf("lease %q names no run", k)
		}
		return nil
	})
}

var _ bot.LeaseReleaser = (*DB)(nil)

// UpdateFencedRelease runs fn as UpdateFenced does and then, in the same transaction,
// releases l as ReleaseLease does.
func (db *DB) UpdateFencedRelease(ctx context.Context, l bot.Lease, fn func(tx bot.Tx) error) error {
	return db.updateFenced(ctx, l, fn, true)
}

// releaseIn gives l's run up in b, keeping its epoch for the next claim.
func releaseIn(t *tx, b *bolt.Bucket, l bot.Lease) error {
	return putLease(t, b, bot.Lease{RunID: l.RunID, Epoch: l.Epoch, Expires: time.Unix(0, 0).UTC()})
}
