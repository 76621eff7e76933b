package store

import (
	"bytes"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// An outbox item put again at another time.
//
// Every checkpoint puts its run's status card in the outbox again: the same item but for
// its time. Listing the outbox decoded each such item afresh at every dispatcher pass that
// found it changed, a few hundred a pass while a thousand runs go. An item whose stored
// bytes are the cached item's but for the created_at value takes the cached item with
// the new time instead, if the result encodes to exactly the stored bytes.

// createdAtField opens an item's time. It can only be the item's own field: a quote inside
// a string is written \", and no other object of an item has a created_at.
var createdAtField = []byte(`,"created_at":"`)

// restamped returns the item stored as v when v is c's bytes with only the time changed:
// c's item at that time, which encodes to v, so it is what decoding v gives.
func restamped(c *cachedItem, v []byte) (bot.OutboxItem, bool) {
	i := bytes.Index(c.raw, createdAtField)
	if i < 0 {
		return bot.OutboxItem{}, false
	}
	start := i + len(createdAtField)
	n := bytes.IndexByte(c.raw[start:], '"')
	if n < 0 {
		return bot.OutboxItem{}, false
	}
	prefix, suffix := c.raw[:start], c.raw[start+n:]
	if len(v) <= len(prefix)+len(suffix) || !bytes.HasPrefix(v, prefix) || !bytes.HasSuffix(v, suffix) {
		return bot.OutboxItem{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(v[len(prefix):len(v)-len(suffix)]))
	if err != nil {
		return bot.OutboxItem{}, false
	}
	it := c.item
	it.CreatedAt = at
	data, err := encodeOutboxItem(&it)
	if err != nil || !bytes.Equal(data, v) {
		return bot.OutboxItem{}, false
	}
	return it, true
}
