package bot

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"
)

// outboxOnly is a store that keeps an outbox and nothing else, whose transactions apply
// their deletes only when they commit, and on which deleting one key always fails.
type outboxOnly struct {
	Store // nil: only Update is used
	items map[string]bool
	bad   string
}

type outboxOnlyTx struct {
	Tx      // nil: only DeleteOutbox is used
	s       *outboxOnly
	deleted []string
}

func (tx *outboxOnlyTx) DeleteOutbox(key string) error {
	if key == tx.s.bad {
		return errors.New("delete outbox item: input/output error")
	}
	tx.deleted = append(tx.deleted, key)
	return nil
}

func (s *outboxOnly) Update(_ context.Context, fn func(tx Tx) error) error {
	tx := &outboxOnlyTx{s: s}
	if err := fn(tx); err != nil {
		return err
	}
	for _, k := range tx.deleted {
		delete(s.items, k)
	}
	return nil
}

// TestSettleKeepsGoingPastAnItemTheStoreRefuses settles three sent notices in one write, one
// of which the store refuses: the write fails, and each item is then settled on its own, so
// the other two are done and only the refused one is remembered as sent but not settled.
func TestSettleKeepsGoingPastAnItemTheStoreRefuses(t *testing.T) {
	s := &outboxOnly{items: map[string]bool{"notice/1": true, "notice/2": true, "notice/3": true}, bad: "notice/2"}
	d := newDispatcher(s, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Second, time.Now)
	for i, key := range []string{"notice/1", "notice/2", "notice/3"} {
		ch := string(rune('A' + i))
		d.settling = append(d.settling, result{
			job:     job{it: OutboxItem{Key: key, Kind: OutboxNotice}, key: ch},
			outcome: outcomeSent,
			ref:     MessageRef{ID: "m" + ch},
		})
	}
	d.settle(t.Context())
	if left := slices.Sorted(maps.Keys(s.items)); !slices.Equal(left, []string{"notice/2"}) {
		t.Errorf("outbox holds %v after the settle, want only the refused item", left)
	}
	for key, ch := range d.channels {
		var unsettled []string
		for k := range ch.unsettled {
			unsettled = append(unsettled, k)
		}
		if want := map[string][]string{"B": {"notice/2"}}[key]; !slices.Equal(unsettled, want) {
			t.Errorf("channel %s remembers %v as sent but not settled, want %v", key, unsettled, want)
		}
	}
}
