package storetest

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// Holds on channels (bot.HoldStore): what a new leader of the outbox reads to honour the
// Retry-After the last one heard.

func holdStore(t *testing.T, s bot.Store) bot.HoldStore {
	t.Helper()
	h, ok := s.(bot.HoldStore)
	if !ok {
		t.Fatalf("%T does not implement bot.HoldStore", s)
	}
	return h
}

func holdsOf(t *testing.T, s bot.Store) []bot.Hold {
	t.Helper()
	got, err := holdStore(t, s).Holds(t.Context())
	if err != nil {
		t.Fatalf("list holds: %v", err)
	}
	slices.SortFunc(got, func(a, b bot.Hold) int { return cmp.Compare(a.Key, b.Key) })
	return got
}

// testHolds stores, replaces and clears holds: a clear names the hold it clears, so that a
// leader clearing a hold that ended never removes a newer one stored meanwhile. Holds are
// seen from another handle, as a new leader sees them, and outlive a restart.
func testHolds(t *testing.T, su *suite) {
	s := su.open(t)
	hs := holdStore(t, s)
	ctx := t.Context()
	equal(t, "holds of a new store", holdsOf(t, s), []bot.Hold(nil))
	c1 := bot.Hold{Key: "slack/C1", Until: at(30 * time.Second), Why: "rate limit"}
	c2 := bot.Hold{Key: "discord/G1/TH9", Until: at(time.Minute)}
	for _, h := range []bot.Hold{c1, c2} {
		if err := hs.PutHold(ctx, h); err != nil {
			t.Fatalf("put hold %s: %v", h.Key, err)
		}
	}
	equal(t, "two holds", holdsOf(t, s), []bot.Hold{c2, c1})
	later := c1
	later.Until = at(2 * time.Minute)
	if err := hs.PutHold(ctx, later); err != nil {
		t.Fatal(err)
	}
	equal(t, "a hold replaced", holdsOf(t, s), []bot.Hold{c2, later})
	if err := hs.ClearHold(ctx, c1); err != nil {
		t.Fatalf("clear a replaced hold: %v", err)
	}
	equal(t, "clearing the replaced hold leaves the newer one", holdsOf(t, s), []bot.Hold{c2, later})
	if su.second != nil {
		equal(t, "holds seen from another handle", holdsOf(t, su.second(t, s)), []bot.Hold{c2, later})
	}
	if su.reopen != nil {
		s = su.reopen(t, s)
		hs = holdStore(t, s)
		equal(t, "holds after a restart", holdsOf(t, s), []bot.Hold{c2, later})
	}
	for _, h := range []bot.Hold{later, c2, c2} {
		if err := hs.ClearHold(ctx, h); err != nil {
			t.Fatalf("clear hold %s: %v", h.Key, err)
		}
	}
	equal(t, "holds once cleared", holdsOf(t, s), []bot.Hold(nil))
	for _, bad := range []bot.Hold{{Until: at(0)}, {Key: "slack/C1"}} {
		if err := hs.PutHold(ctx, bad); err == nil {
			t.Errorf("hold %+v stored, want it refused", bad)
		}
	}
}

// testOutboxMark stores an outbox item marked as being sent (bot.Sending, written before a
// new post's call) and reads the mark back, and its removal, which is how a new leader
// knows a post's outcome is unknown.
func testOutboxMark(t *testing.T, su *suite) {
	s := su.open(t)
	item := bot.OutboxItem{Key: "answer/r1", Kind: bot.OutboxAnswer, RunID: "r1", Thread: threadA, CreatedAt: t0,
		Sending: &bot.Sending{Owner: "replica-a", Term: 3}}
	outbox := func() []bot.OutboxItem {
		var items []bot.OutboxItem
		view(t, s, func(tx bot.Tx) error {
			var err error
			items, err = tx.Outbox()
			return err
		})
		return items
	}
	update(t, s, func(tx bot.Tx) error { return tx.PutOutbox(item) })
	equal(t, "marked item", outbox(), []bot.OutboxItem{item})
	item.Sending = nil
	update(t, s, func(tx bot.Tx) error { return tx.PutOutbox(item) })
	equal(t, "unmarked item", outbox(), []bot.OutboxItem{item})
}
