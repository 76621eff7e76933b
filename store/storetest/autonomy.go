package storetest

import (
	"errors"
	"testing"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// testChannelAutonomy checks the channel autonomy records: one per channel, shared by all of
// the channel's threads, replaced by a later put, refused without a channel, and kept across a
// reopen when the backend can be reopened.
func testChannelAutonomy(t *testing.T, su *suite) {
	s := su.open(t)
	otherThread := threadA
	otherThread.Thread = "1740830499.000200"
	view(t, s, func(tx bot.Tx) error {
		if got, err := tx.ChannelAutonomy(threadA); !errors.Is(err, bot.ErrNotFound) {
			t.Errorf("a channel nobody set: got %v, %v; want ErrNotFound", js(got), err)
		}
		return nil
	})
	set := func(level agent.Level) *bot.ChannelAutonomy {
		return &bot.ChannelAutonomy{Platform: threadA.Platform, Workspace: threadA.Workspace, Channel: threadA.Channel,
			Level: level, SetBy: bot.User{ID: "U1", Name: "ada"}, SetAt: at(0)}
	}
	update(t, s, func(tx bot.Tx) error { return tx.PutChannelAutonomy(set(agent.LevelBold)) })
	update(t, s, func(tx bot.Tx) error { return tx.PutChannelAutonomy(set(agent.LevelCareful)) })
	check := func(s bot.Store) {
		t.Helper()
		view(t, s, func(tx bot.Tx) error {
			got, err := tx.ChannelAutonomy(otherThread)
			if err != nil {
				t.Fatalf("channel autonomy from another thread of the channel: %v", err)
			}
			equal(t, "channel autonomy", got, set(agent.LevelCareful))
			if got, err := tx.ChannelAutonomy(threadB); !errors.Is(err, bot.ErrNotFound) {
				t.Errorf("another channel: got %v, %v; want ErrNotFound", js(got), err)
			}
			return nil
		})
	}
	check(s)
	if err := s.Update(t.Context(), func(tx bot.Tx) error { return tx.PutChannelAutonomy(&bot.ChannelAutonomy{Level: agent.LevelBold}) }); err == nil {
		t.Error("a channel autonomy record without a channel was stored")
	}
	if su.reopen != nil {
		check(su.reopen(t, s))
	}
}
