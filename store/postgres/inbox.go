package postgres

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/loopbot/loopbot/bot"
)

// The events accepted and not yet handled (bot/inbox.go) are the inbox bucket of the
// records table, keyed by event ID, so that a redelivery waiting with its first delivery
// is one row.
const bucketInbox = "inbox"

// AddInbox inserts the row unless it is there: ON CONFLICT DO NOTHING decides under the
// row's unique key, so two transactions adding the same event add it once.
func (t *tx) AddInbox(e *bot.InboxEntry) (bool, error) {
	if e == nil || e.Event.ID == "" {
		return false, errors.New("add inbox entry: no event ID")
	}
	if err := t.check(true); err != nil {
		return false, fmt.Errorf("add inbox entry %s: %w", e.Event.ID, err)
	}
	data, err := json.Marshal(e)
	if err != nil {
		return false, fmt.Errorf("add inbox entry %s: %w", e.Event.ID, err)
	}
	n, err := t.exec("INSERT INTO records (bucket, key, data) VALUES ($1, $2, $3) ON CONFLICT (bucket, key) DO NOTHING",
		bucketInbox, e.Event.ID, data)
	if err != nil {
		return false, fmt.Errorf("add inbox entry %s: %w", e.Event.ID, err)
	}
	return n == 1, nil
}

// Inbox lists the waiting events in the order they were accepted.
func (t *tx) Inbox() ([]*bot.InboxEntry, error) {
	if err := t.check(false); err != nil {
		return nil, fmt.Errorf("list inbox: %w", err)
	}
	out, err := scan[bot.InboxEntry](t, bucketInbox, "inbox entry",
		"SELECT key, data FROM records WHERE bucket = $1 ORDER BY key"+t.forUpdate(), bucketInbox)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b *bot.InboxEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

func (t *tx) DeleteInbox(id string) error {
	if err := t.check(true); err != nil {
		return fmt.Errorf("delete inbox entry %s: %w", id, err)
	}
	if err := t.write("DELETE FROM records WHERE bucket = $1 AND key = $2", bucketInbox, id); err != nil {
		return fmt.Errorf("delete inbox entry %s: %w", id, err)
	}
	return nil
}
