package postgres_test

import (
	"testing"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// TestQueuedWriteFailingAtCommit: a's put of a conversation it read as absent is queued
// until its COMMIT (pipeline.go); b creates that conversation meanwhile, so a's insert fails
// there with a unique violation. a's transaction must not count as committed: it runs
// again, finds b's conversation, and stores its own change on top of it.
func TestQueuedWriteFailingAtCommit(t *testing.T) {
	url := pgtest.URL(t)
	a, b := openURL(t, url), openURL(t, url)
	thread := bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}
	attempts := 0
	err := a.Update(t.Context(), func(tx bot.Tx) error {
		attempts++
		conv, err := tx.Conversation(thread)
		switch {
		case err == nil:
			conv.Runs = append(conv.Runs, "a")
			return tx.PutConversation(conv)
		case attempts > 1:
			return err
		}
		// b creates the conversation after a found it absent.
		if err := b.Update(t.Context(), func(tx bot.Tx) error {
			return tx.PutConversation(&bot.Conversation{Thread: thread, Runs: []string{"b"}})
		}); err != nil {
			return err
		}
		return tx.PutConversation(&bot.Conversation{Thread: thread, Runs: []string{"a"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := a.View(t.Context(), func(tx bot.Tx) error {
		conv, err := tx.Conversation(thread)
		if err == nil {
			got = conv.Runs
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if attempts != 2 || len(got) != 2 || got[0] != "b" || got[1] != "a" {
		t.Errorf("after %d attempts the conversation's runs are %v, want b's then a's after a second attempt", attempts, got)
	}
}
