package postgres

import (
	"errors"
	"fmt"
	"slices"

	"github.com/loopbot/loopbot/bot"
)

// Channel memory is a bucket of the records table per channel, "memory:" and the channel's
// key, with the fact's ID as the key: one channel's facts are exactly one bucket, whatever
// characters the channel's key holds (PostgreSQL's text cannot hold the NUL byte bbolt's
// keys separate them with).

func memoryBucket(channel string) string { return "memory:" + channel }

func (t *tx) Memory(channel string) ([]*bot.MemoryFact, error) {
	if err := t.check(false); err != nil {
		return nil, fmt.Errorf("list memory of %s: %w", channel, err)
	}
	out, err := scan[bot.MemoryFact](t, memoryBucket(channel), "memory fact",
		"SELECT key, data FROM records WHERE bucket = $1 ORDER BY key"+t.forUpdate(), memoryBucket(channel))
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b *bot.MemoryFact) int { return a.At.Compare(b.At) })
	return out, nil
}

func (t *tx) MemoryFact(channel, id string) (*bot.MemoryFact, error) {
	return getRecord[bot.MemoryFact](t, memoryBucket(channel), id, "memory fact")
}

func (t *tx) PutMemory(f *bot.MemoryFact) error {
	switch {
	case f == nil:
		return errors.New("put memory fact: nil")
	case f.Channel == "" || f.ID == "":
		return errors.New("put memory fact: no channel or id")
	}
	return putRecord(t, memoryBucket(f.Channel), f.ID, "memory fact", f)
}

// DeleteMemory forgets a fact; a missing one was forgotten before.
func (t *tx) DeleteMemory(channel, id string) error {
	if err := t.check(true); err != nil {
		return fmt.Errorf("delete memory fact %s: %w", id, err)
	}
	if err := t.write("DELETE FROM records WHERE bucket = $1 AND key = $2", memoryBucket(channel), id); err != nil {
		return fmt.Errorf("delete memory fact %s: %w", id, err)
	}
	return nil
}
