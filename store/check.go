package store

import (
	"context"
	"fmt"
	"reflect"

	bolt "go.etcd.io/bbolt"

	"github.com/loopbot/loopbot/bot"
)

// Check runs bbolt's consistency check over the whole file, then checks that the index
// buckets agree with the buckets they index. It returns the first problem found, or nil.
func (db *DB) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return db.bolt.View(func(btx *bolt.Tx) error {
		var first error
		// The channel must be drained to the end: the checker's goroutine holds the
		// transaction until it has sent every error.
		for err := range btx.Check() {
			if first == nil {
				first = fmt.Errorf("check store: %w", err)
			}
		}
		if first != nil {
			return first
		}
		if err := checkRunIndex(btx); err != nil {
			return fmt.Errorf("check store: %w", err)
		}
		if err := checkRunHeads(btx); err != nil {
			return fmt.Errorf("check store: %w", err)
		}
		if err := checkEventIndex(btx); err != nil {
			return fmt.Errorf("check store: %w", err)
		}
		return nil
	})
}

// checkRunIndex checks that run_ids and runs are a one-to-one map whose records carry the
// IDs they are indexed by.
func checkRunIndex(btx *bolt.Tx) error {
	runs, ids := btx.Bucket(bucketRuns), btx.Bucket(bucketRunIDs)
	if runs == nil || ids == nil {
		return fmt.Errorf("run buckets missing")
	}
	n := 0
	err := ids.ForEach(func(id, key []byte) error {
		n++
		data := runs.Get(key)
		if data == nil {
			return fmt.Errorf("run %s: index names missing key %x", id, key)
		}
		r, err := decode[struct {
			ID string `json:"id"`
		}](data, "run "+string(id))
		if err != nil {
			return err
		}
		if r.ID != string(id) {
			return fmt.Errorf("run %s: index names the record of run %s", id, r.ID)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if got := runs.Stats().KeyN; got != n {
		return fmt.Errorf("%d runs but %d run index entries", got, n)
	}
	return nil
}

// checkEventIndex checks that every claim has exactly its one expiry index entry.
func checkEventIndex(btx *bolt.Tx) error {
	events, index := btx.Bucket(bucketEvents), btx.Bucket(bucketEventExpiry)
	if events == nil || index == nil {
		return fmt.Errorf("event buckets missing")
	}
	n := 0
	err := events.ForEach(func(id, v []byte) error {
		n++
		c, err := decode[claim](v, "event claim "+string(id))
		if err != nil {
			return err
		}
		if index.Get(expiryKey(c.ExpiresAt, string(id))) == nil {
			return fmt.Errorf("event claim %s has no expiry index entry", id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	m := 0
	err = index.ForEach(func(k, _ []byte) error {
		m++
		if len(k) < 8 || events.Get(k[8:]) == nil {
			return fmt.Errorf("expiry index entry %x names no claim", k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n != m {
		return fmt.Errorf("%d event claims but %d expiry index entries", n, m)
	}
	return nil
}

// checkRunHeads checks that every run has its head, equal to the record without its state,
// and exactly one status index entry, for its status and naming its ID; and that neither
// bucket holds anything else.
func checkRunHeads(btx *bolt.Tx) error {
	runs, heads, byStatus := btx.Bucket(bucketRuns), btx.Bucket(bucketRunHeads), btx.Bucket(bucketRunsByStatus)
	if runs == nil || heads == nil || byStatus == nil {
		return fmt.Errorf("run buckets missing")
	}
	n := 0
	err := runs.ForEach(func(key, data []byte) error {
		n++
		r, err := decode[bot.RunRecord](data, fmt.Sprintf("run %x", key))
		if err != nil {
			return err
		}
		hd := heads.Get(key)
		if hd == nil {
			return fmt.Errorf("run %s has no head", r.ID)
		}
		h, err := decode[bot.RunRecord](hd, "run head "+r.ID)
		if err != nil {
			return err
		}
		if want := head(r); !reflect.DeepEqual(*h, want) {
			return fmt.Errorf("run %s: head %s disagrees with the record", r.ID, hd)
		}
		id := byStatus.Get(statusKey(r.Status, key))
		if id == nil {
			return fmt.Errorf("run %s has no status index entry for %q", r.ID, r.Status)
		}
		if string(id) != r.ID {
			return fmt.Errorf("run %s: its status index entry names run %s", r.ID, id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if got := heads.Stats().KeyN; got != n {
		return fmt.Errorf("%d runs but %d run heads", n, got)
	}
	// Every run has its entry, so a count above the runs' is an entry for a run that does
	// not exist or a second one for a run under a status it no longer has.
	m := 0
	err = byStatus.ForEach(func(k, _ []byte) error {
		m++
		i := len(k) - runKeyLen - 1
		if i < 0 || k[i] != 0 {
			return fmt.Errorf("status index entry %q is not a status and a run key", k)
		}
		hd := heads.Get(k[i+1:])
		if hd == nil {
			return fmt.Errorf("status index entry %q names no run", k)
		}
		h, err := decode[bot.RunRecord](hd, fmt.Sprintf("run head %x", k[i+1:]))
		if err != nil {
			return err
		}
		if string(h.Status) != string(k[:i]) {
			return fmt.Errorf("status index lists run %s as %q, but it is %q", h.ID, k[:i], h.Status)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if m != n {
		return fmt.Errorf("%d runs but %d status index entries", n, m)
	}
	return nil
}
