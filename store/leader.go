package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/loopbot/loopbot/bot"
)

// Leaderships (bot.Elector) in the leaders bucket: role -> bot.Leadership as JSON. One
// process holds the file, so its bot wins every election it asks for; two bots sharing one
// handle (as the tests run them) elect one, as replicas on PostgreSQL do.
//
// The bucket is made by the first election, as run_leases is: an older loopbot ignores it.
var bucketLeaders = []byte("leaders")

var _ bot.Elector = (*DB)(nil)

func (db *DB) Lead(ctx context.Context, role, owner string, now time.Time, ttl time.Duration) (bot.Leadership, error) {
	if err := bot.CheckLead(role, owner, ttl); err != nil {
		return bot.Leadership{}, fmt.Errorf("lead %s: %w", role, err)
	}
	var out bot.Leadership
	err := db.update(ctx, func(t *tx) error {
		b, err := t.btx.CreateBucketIfNotExists(bucketLeaders)
		if err != nil {
			return err
		}
		var stored bot.Leadership
		if data := b.Get([]byte(role)); data != nil {
			if err := json.Unmarshal(data, &stored); err != nil {
				// A leadership that does not decode is as good as none: the next one
				// replaces it.
				stored = bot.Leadership{}
			}
		}
		next, changed := bot.NextLeadership(stored, role, owner, now, ttl)
		out = next
		if !changed {
			return nil
		}
		data, err := json.Marshal(&next)
		if err != nil {
			return err
		}
		t.wrote = true
		return b.Put([]byte(role), data)
	})
	if err != nil {
		return bot.Leadership{}, fmt.Errorf("lead %s: %w", role, err)
	}
	return out, nil
}

func (db *DB) Resign(ctx context.Context, role, owner string) error {
	err := db.update(ctx, func(t *tx) error {
		b := t.btx.Bucket(bucketLeaders)
		if b == nil {
			return nil
		}
		var stored bot.Leadership
		data := b.Get([]byte(role))
		if data == nil || json.Unmarshal(data, &stored) != nil || stored.Owner != owner {
			return nil
		}
		stored.Owner, stored.Expires = "", time.Unix(0, 0).UTC()
		if data, err := json.Marshal(&stored); err != nil {
			return err
		} else {
			t.wrote = true
			return b.Put([]byte(role), data)
		}
	})
	if err != nil {
		return fmt.Errorf("resign %s: %w", role, err)
	}
	return nil
}

// openSchema is what Open does in its first write: initSchema, then releaseStale.
func openSchema(btx *bolt.Tx) error {
	if err := initSchema(btx); err != nil {
		return err
	}
	return releaseStale(btx)
}

// releaseStale releases every run lease and leadership a file holds as it is opened: the
// file is locked by one process at a time, so they belong to a process that ended (killed,
// say) and no replica will renew them. A restarted loopbot resumes its runs at once rather
// than after the leases' time. Epochs are kept, so the next claim still takes a new one.
func releaseStale(btx *bolt.Tx) error {
	if b := btx.Bucket(bucketRunLeases); b != nil {
		if err := releaseEach(b, func(data []byte) ([]byte, error) {
			var l bot.Lease
			if err := json.Unmarshal(data, &l); err != nil || l.Owner == "" {
				return nil, nil // undecodable leases are as good as released: claims replace them
			}
			l.Owner, l.Expires = "", time.Unix(0, 0).UTC()
			return json.Marshal(&l)
		}); err != nil {
			return fmt.Errorf("release stale run leases: %w", err)
		}
	}
	if b := btx.Bucket(bucketLeaders); b != nil {
		if err := releaseEach(b, func(data []byte) ([]byte, error) {
			var l bot.Leadership
			if err := json.Unmarshal(data, &l); err != nil || l.Owner == "" {
				return nil, nil
			}
			l.Owner, l.Expires = "", time.Unix(0, 0).UTC()
			return json.Marshal(&l)
		}); err != nil {
			return fmt.Errorf("release stale leaderships: %w", err)
		}
	}
	return nil
}

// releaseEach puts release's value for every record of b for which it returns one.
func releaseEach(b *bolt.Bucket, release func(data []byte) ([]byte, error)) error {
	changed := map[string][]byte{}
	err := b.ForEach(func(k, v []byte) error {
		data, err := release(v)
		if data != nil {
			changed[string(k)] = data
		}
		return err
	})
	if err != nil {
		return err
	}
	for k, v := range changed {
		if err := b.Put([]byte(k), v); err != nil {
			return err
		}
	}
	return nil
}
