package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ClaimEvent records id as seen until now+ttl. It reports true when id was not seen before
// or its earlier claim has expired (a claim is live while now is before its expiry), and
// false for a duplicate within ttl.
func (db *DB) ClaimEvent(ctx context.Context, id string, now time.Time, ttl time.Duration) (bool, error) {
	// A duplicate writes nothing, so its transaction costs no disk sync (see group.go).
	var first bool
	err := db.update(ctx, func(t *tx) error {
		var err error
		first, err = t.ClaimEvent(id, now, ttl)
		return err
	})
	if err != nil {
		return false, err
	}
	return first, nil
}

// ClaimEvent claims id inside the transaction, as DB.ClaimEvent does alone: the claim
// commits with what the transaction does about the event, or not at all.
func (t *tx) ClaimEvent(id string, now time.Time, ttl time.Duration) (bool, error) {
	if t.closed {
		return false, ErrTxClosed
	}
	first, err := claimEvent(t.btx, id, now, ttl)
	// A live claim is left as it is; anything else may have changed the buckets.
	t.wrote = t.wrote || first || err != nil
	if err != nil {
		return false, fmt.Errorf("claim event %s: %w", id, err)
	}
	return first, nil
}

// claimEvent records the claim in btx and reports whether it is the first live one.
func claimEvent(btx *bolt.Tx, id string, now time.Time, ttl time.Duration) (bool, error) {
	if id == "" {
		return false, errors.New("no id")
	}
	if ttl <= 0 {
		return false, fmt.Errorf("ttl must be positive, got %s", ttl)
	}
	expires := now.Add(ttl).UTC()
	if err := checkKeyTime(expires); err != nil {
		return false, err
	}
	if !btx.Writable() {
		return false, errors.New("claim in a read-only transaction")
	}
	events, index := btx.Bucket(bucketEvents), btx.Bucket(bucketEventExpiry)
	if events == nil || index == nil {
		return false, errors.New("event buckets are missing")
	}
	if v := events.Get([]byte(id)); v != nil {
		old, err := decode[claim](v, "event claim "+id)
		if err != nil {
			return false, err
		}
		if now.Before(old.ExpiresAt) {
			return false, nil
		}
		if err := index.Delete(expiryKey(old.ExpiresAt, id)); err != nil {
			return false, err
		}
	}
	data, err := json.Marshal(claim{ExpiresAt: expires})
	if err != nil {
		return false, err
	}
	if err := events.Put([]byte(id), data); err != nil {
		return false, err
	}
	return true, index.Put(expiryKey(expires, id), []byte{})
}

// PurgeEvents deletes the claims that expired at or before now and returns how many. It
// reads the expiry index from its start and stops at the first live claim.
func (db *DB) PurgeEvents(ctx context.Context, now time.Time) (int, error) {
	if err := checkKeyTime(now); err != nil {
		return 0, fmt.Errorf("purge events: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	limit := timeKey(now)
	n := 0
	// An empty purge writes nothing, so its transaction costs no disk sync (see group.go).
	err := db.update(ctx, func(t *tx) error {
		n = 0
		btx := t.btx
		events, index := btx.Bucket(bucketEvents), btx.Bucket(bucketEventExpiry)
		// Keys are collected first because deleting under a bbolt cursor can make it skip
		// the next key.
		var expired [][]byte
		c := index.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if len(k) < 8 {
				return fmt.Errorf("malformed expiry index key %x", k)
			}
			if bytes.Compare(k[:8], limit) > 0 {
				break
			}
			expired = append(expired, bytes.Clone(k))
		}
		if len(expired) > 0 {
			t.wrote = true
		}
		for _, k := range expired {
			if err := index.Delete(k); err != nil {
				return err
			}
			if err := events.Delete(k[8:]); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("purge events: %w", err)
	}
	return n, nil
}
