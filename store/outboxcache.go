package store

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/loopbot/loopbot/bot"
)

// The outbox's decoded items.
//
// The dispatcher lists the whole outbox on every pass, and with many runs going that is a
// status card for each of them, most unchanged since the pass before: decoding them all again
// was a sixteenth of the 1000-run makespan scenario's CPU. So the store keeps each item it
// decoded with the bytes it decoded it from, and an item whose stored bytes are the same is
// not decoded again. The bytes decide, not the key: an item put again under its key (a card
// edit) has other bytes and is decoded afresh.

// outboxCache maps an outbox key to its item as last decoded. The map is never changed once
// published: each listing builds the next from what it found, so a listing in one transaction
// never sees another's half-built map, and items no longer stored are dropped. The entries
// are pointers to cached items, which are never changed either, so that the next map
// shares them: with a thousand cards and one changed, a listing builds a map of a
// thousand pointers, not of a thousand copies of an item and its bytes.
type outboxCache struct {
	mu    sync.Mutex
	items map[string]*cachedItem
}

type cachedItem struct {
	raw  []byte // the stored value it was decoded from
	item bot.OutboxItem
}

func (c *outboxCache) load() map[string]*cachedItem {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.items
}

func (c *outboxCache) store(m map[string]*cachedItem) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items = m
}

// Outbox lists the items oldest first, so that a thread's messages go out in the order they
// were asked for. The outbox only holds what is not yet sent, so sorting it is cheap.
func (t *tx) Outbox() ([]bot.OutboxItem, error) { return t.AppendOutbox(nil) }

// AppendOutbox appends what Outbox lists to dst (bot.OutboxAppender).
func (t *tx) AppendOutbox(dst []bot.OutboxItem) ([]bot.OutboxItem, error) {
	b, err := t.bucket(bucketOutbox)
	if err != nil {
		return nil, fmt.Errorf("list outbox item: %w", err)
	}
	var cache *outboxCache
	var seen map[string]*cachedItem
	if t.db != nil {
		cache = &t.db.outbox
		seen = cache.load()
	}
	// The items are gathered by pointer and sorted so: an item is a few hundred bytes, and
	// sorting a thousand of them in place moved each many times, at every pass.
	listed := make([]*bot.OutboxItem, 0, len(seen))
	hits := make([]string, 0, len(seen)) // keys of the items found decoded
	var fresh []*cachedItem              // items decoded now
	err = b.ForEach(func(k, v []byte) error {
		c := seen[string(k)]
		if c != nil && bytes.Equal(c.raw, v) {
			hits = append(hits, c.item.Key)
			listed = append(listed, &c.item)
			return nil
		}
		if c != nil {
			// The same item put again at another time, as every checkpoint puts its
			// run's card (outbox_restamp.go).
			if it, ok := restamped(c, v); ok {
				c = &cachedItem{raw: bytes.Clone(v), item: it}
				fresh = append(fresh, c)
				listed = append(listed, &c.item)
				return nil
			}
		}
		it, err := decode[bot.OutboxItem](v, "outbox item "+string(k))
		if err != nil {
			// One bad item must not hide the rest: it is skipped, and moved aside once
			// this transaction ends.
			t.undecodable(bucketOutbox, k, v, err)
			return nil
		}
		if it.Key == string(k) {
			fresh = append(fresh, &cachedItem{raw: bytes.Clone(v), item: *it})
		}
		listed = append(listed, it)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list outbox item: %w", err)
	}
	// A new map only when the outbox changed since the last one was made: listing an
	// unchanged outbox of a thousand items allocates no map of a thousand entries.
	if cache != nil && (len(fresh) > 0 || len(hits) != len(seen)) {
		next := make(map[string]*cachedItem, len(hits)+len(fresh))
		for _, k := range hits {
			next[k] = seen[k]
		}
		for _, c := range fresh {
			next[c.item.Key] = c
		}
		cache.store(next)
	}
	slices.SortStableFunc(listed, func(a, b *bot.OutboxItem) int { return a.CreatedAt.Compare(b.CreatedAt) })
	out := slices.Grow(dst[:0], len(listed))
	for _, it := range listed {
		out = append(out, *it)
		// The caller may change what it is given; the cached items' lists stay as decoded.
		out[len(out)-1].Actions = slices.Clone(it.Actions)
	}
	return out, nil
}

// OutboxHolds reports whether the outbox holds it exactly as given (bot.OutboxHolder): the
// stored bytes are those PutOutbox would write for it. An item that went through a
// decoding that does not give back the same bytes is reported as not held, which only costs
// the caller the check it would have made anyway.
func (t *tx) OutboxHolds(it bot.OutboxItem) (bool, error) {
	b, err := t.bucket(bucketOutbox)
	if err != nil {
		return false, fmt.Errorf("outbox item %s: %w", it.Key, err)
	}
	stored := b.Get([]byte(it.Key))
	if stored == nil {
		return false, nil
	}
	data, err := encodeOutboxItem(&it)
	if err != nil {
		return false, fmt.Errorf("outbox item %s: %w", it.Key, err)
	}
	return bytes.Equal(stored, data), nil
}
