package storetest

import (
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// testInbox checks that an event is added to the inbox once however often it is added,
// that the inbox lists in Seq order (not the order of the IDs), that it outlives a reopen,
// and that deleting an entry (or one that is not there) leaves the others.
func testInbox(t *testing.T, su *suite) {
	s := su.open(t)
	entry := func(seq int64, id string) *bot.InboxEntry {
		return &bot.InboxEntry{Seq: seq, Replica: "replica-1", Event: bot.Event{Kind: bot.EventMention, ID: id, Thread: threadA, User: bot.User{ID: "U1"}, Text: "go " + id, At: at(0)}}
	}
	var added []bool
	update(t, s, func(tx bot.Tx) error {
		added = added[:0]
		for _, e := range []*bot.InboxEntry{entry(2, "Ev-a"), entry(1, "Ev-b"), entry(3, "Ev-a"), entry(3, "Ev-c")} {
			ok, err := tx.AddInbox(e)
			if err != nil {
				return err
			}
			added = append(added, ok)
		}
		return nil
	})
	equal(t, "added", added, []bool{true, true, false, true})
	// A redelivery in a later transaction is not added either.
	update(t, s, func(tx bot.Tx) error {
		ok, err := tx.AddInbox(entry(9, "Ev-b"))
		if ok {
			t.Error("AddInbox added Ev-b a second time")
		}
		return err
	})
	if su.reopen != nil {
		s = su.reopen(t, s)
	}
	list := func() []*bot.InboxEntry {
		var got []*bot.InboxEntry
		view(t, s, func(tx bot.Tx) error {
			var err error
			got, err = tx.Inbox()
			return err
		})
		return got
	}
	equal(t, "inbox", list(), []*bot.InboxEntry{entry(1, "Ev-b"), entry(2, "Ev-a"), entry(3, "Ev-c")})
	update(t, s, func(tx bot.Tx) error {
		if err := tx.DeleteInbox("Ev-a"); err != nil {
			return err
		}
		return tx.DeleteInbox("Ev-missing")
	})
	equal(t, "inbox after delete", list(), []*bot.InboxEntry{entry(1, "Ev-b"), entry(3, "Ev-c")})
	s.Update(t.Context(), func(tx bot.Tx) error {
		if _, err := tx.AddInbox(&bot.InboxEntry{Seq: 4}); err == nil {
			t.Error("AddInbox stored an event without an ID")
		}
		return nil
	})
}
