package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loopbot/loopbot/bot"
)

// Holds (bot.HoldStore) in the holds bucket: pace key -> bot.Hold as JSON. The bucket is
// made by the first hold, as leaders is: an older loopbot ignores it. Unlike leases and
// leaderships, holds are kept when the file is opened again: a platform's Retry-After
// outlives the process that heard it.
var bucketHolds = []byte("holds")

var _ bot.HoldStore = (*DB)(nil)

func (db *DB) PutHold(ctx context.Context, h bot.Hold) error {
	if err := bot.CheckHold(h); err != nil {
		return fmt.Errorf("put hold: %w", err)
	}
	data, err := json.Marshal(&h)
	if err != nil {
		return fmt.Errorf("put hold %s: %w", h.Key, err)
	}
	err = db.update(ctx, func(t *tx) error {
		b, err := t.btx.CreateBucketIfNotExists(bucketHolds)
		if err != nil {
			return err
		}
		t.wrote = true
		return b.Put([]byte(h.Key), data)
	})
	if err != nil {
		return fmt.Errorf("put hold %s: %w", h.Key, err)
	}
	return nil
}

func (db *DB) Holds(ctx context.Context) ([]bot.Hold, error) {
	var out []bot.Hold
	err := db.do(ctx, false, func(t *tx) error {
		out = nil
		b := t.btx.Bucket(bucketHolds)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var h bot.Hold
			if err := json.Unmarshal(v, &h); err != nil {
				// A hold that does not decode holds nothing; the next hold of its
				// channel replaces it.
				return nil
			}
			out = append(out, h)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list holds: %w", err)
	}
	return out, nil
}

func (db *DB) ClearHold(ctx context.Context, h bot.Hold) error {
	err := db.update(ctx, func(t *tx) error {
		b := t.btx.Bucket(bucketHolds)
		if b == nil {
			return nil
		}
		var stored bot.Hold
		data := b.Get([]byte(h.Key))
		if data == nil {
			return nil
		}
		if json.Unmarshal(data, &stored) == nil && !stored.Until.Equal(h.Until) {
			return nil // a newer hold
		}
		t.wrote = true
		return b.Delete([]byte(h.Key))
	})
	if err != nil {
		return fmt.Errorf("clear hold %s: %w", h.Key, err)
	}
	return nil
}
