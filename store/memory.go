package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/loopbot/loopbot/bot"
)

// Channel memory lives in the memory bucket under the channel's key, a NUL and the fact's
// ID, so one channel's facts are one range of keys.

func memoryKey(channel, id string) string { return channel + "\x00" + id }

func (t *tx) Memory(channel string) ([]*bot.MemoryFact, error) {
	b, err := t.bucket(bucketMemory)
	if err != nil {
		return nil, fmt.Errorf("list memory of %s: %w", channel, err)
	}
	prefix := []byte(channel + "\x00")
	var out []*bot.MemoryFact
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		f, err := decode[bot.MemoryFact](v, "memory fact "+string(k))
		if err != nil {
			// One bad record must not hide the rest of the channel's memory.
			t.undecodable(bucketMemory, k, v, err)
			continue
		}
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b *bot.MemoryFact) int { return a.At.Compare(b.At) })
	return out, nil
}

func (t *tx) MemoryFact(channel, id string) (*bot.MemoryFact, error) {
	return get[bot.MemoryFact](t, bucketMemory, memoryKey(channel, id), "memory fact")
}

func (t *tx) PutMemory(f *bot.MemoryFact) error {
	switch {
	case f == nil:
		return errors.New("put memory fact: nil")
	case f.Channel == "" || f.ID == "":
		return errors.New("put memory fact: no channel or id")
	}
	return put(t, bucketMemory, memoryKey(f.Channel, f.ID), "memory fact", f)
}

// DeleteMemory forgets a fact; a missing one was forgotten before.
func (t *tx) DeleteMemory(channel, id string) error {
	b, err := t.bucket(bucketMemory)
	if err != nil {
		return fmt.Errorf("delete memory fact %s: %w", id, err)
	}
	t.wrote = true
	if err := b.Delete([]byte(memoryKey(channel, id))); err != nil {
		return fmt.Errorf("delete memory fact %s: %w", id, err)
	}
	return nil
}
