package store

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/loopbot/loopbot/bot"
)

// The inbox holds the events an adapter has had accepted (bot/inbox.go) until the bot has
// handled them, keyed by event ID so that a redelivery waiting with its first delivery is
// one entry.

func (t *tx) AddInbox(e *bot.InboxEntry) (bool, error) {
	if e == nil || e.Event.ID == "" {
		return false, errors.New("add inbox entry: no event ID")
	}
	if err := t.moveIntake(); err != nil {
		return false, err
	}
	b, err := t.bucket(bucketInbox)
	if err != nil {
		return false, fmt.Errorf("add inbox entry %s: %w", e.Event.ID, err)
	}
	key := []byte(e.Event.ID)
	if b.Get(key) != nil {
		return false, nil
	}
	data, err := appendInboxEntry(make([]byte, 0, 320+len(e.Event.Text)), e)
	if err != nil {
		return false, fmt.Errorf("put inbox entry %s: %w", e.Event.ID, err)
	}
	t.wrote = true
	if err := b.Put(key, data); err != nil {
		return false, fmt.Errorf("put inbox entry %s: %w", e.Event.ID, err)
	}
	return true, nil
}

// Inbox reads the whole bucket: it holds the events accepted and not yet handled, a burst
// at most. A write transaction moves the intake journal's entries into it first; a read
// transaction adds those its snapshot has not seen moved.
func (t *tx) Inbox() ([]*bot.InboxEntry, error) {
	if t.btx.Writable() {
		if err := t.moveIntake(); err != nil {
			return nil, err
		}
	}
	out, err := scan(t, bucketInbox, "inbox entry", func(*bot.InboxEntry) bool { return true })
	if err != nil {
		return nil, err
	}
	if !t.btx.Writable() {
		more, err := t.journaled()
		if err != nil {
			return nil, fmt.Errorf("list inbox entry: %w", err)
		}
		out = append(out, more...)
	}
	slices.SortStableFunc(out, func(a, b *bot.InboxEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// DeleteInbox writes only when the entry is there, so that handling an event that came
// another way costs no disk sync (see group.go).
func (t *tx) DeleteInbox(id string) error {
	if err := t.moveIntake(); err != nil {
		return err
	}
	b, err := t.bucket(bucketInbox)
	if err != nil {
		return fmt.Errorf("delete inbox entry %s: %w", id, err)
	}
	if b.Get([]byte(id)) == nil {
		return nil
	}
	t.wrote = true
	if err := b.Delete([]byte(id)); err != nil {
		return fmt.Errorf("delete inbox entry %s: %w", id, err)
	}
	return nil
}
