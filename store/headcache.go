package store

import (
	"bytes"
	"sync"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// Run heads as last written.
//
// Every checkpoint reads its run's head (RunHeader) inside the one writer, to decode the
// record's fields it writes back with the new state, and the head it reads is the one the
// run's previous checkpoint wrote. So PutRun keeps, for each run, the head it wrote beside
// its bytes, and RunHeader returns a copy of it when the stored bytes are those bytes: what
// decoding them gives, without decoding. A write rolled back leaves bytes that are not
// stored, and the next read decodes. A head is kept only when decoding its bytes gives it
// back exactly: its times in UTC without a monotonic reading, no string coerced to valid
// UTF-8, and (TestCachedHeadIsTheDecodedHead) no field a copy would share.

// maxCachedHeads bounds the cache: past it, it starts again empty. A thousand runs
// stepping together keep a thousand heads of a few hundred bytes.
const maxCachedHeads = 4096

type headCache struct {
	mu sync.Mutex
	m  map[string]cachedHead // by run ID
}

type cachedHead struct {
	data []byte
	rec  bot.RunRecord
}

// get returns the head of run id whose stored bytes are data, if it is kept.
func (c *headCache) get(id string, data []byte) (*bot.RunRecord, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok || !bytes.Equal(e.data, data) {
		return nil, false
	}
	return &e.rec, true // e is a copy of the map's value
}

// put keeps h, a run's head without its state, encoded as data, which the caller does not
// change afterwards, when decoding data gives h back exactly.
func (c *headCache) put(h *bot.RunRecord, data []byte) {
	if h.State != nil || h.Encoded != nil || !decodedAsIs(h.CreatedAt) || !decodedAsIs(h.UpdatedAt) ||
		bytes.Contains(data, []byte(`\ufffd`)) {
		c.drop(h.ID)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedHeads {
		c.m = make(map[string]cachedHead)
	}
	c.m[h.ID] = cachedHead{data: data, rec: *h}
}

func (c *headCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

// decodedAsIs reports whether t is what decoding its JSON gives: UTC, and no monotonic
// reading (which Round(0) strips).
func decodedAsIs(t time.Time) bool {
	return t.Location() == time.UTC && t == t.Round(0)
}
