package bot_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/loopbot/loopbot/bot"
)

// TestAcceptGoesAheadOfTheBotsWrites holds the store's writer while one of the bot's own
// writes queues behind it, then accepts an event: the platform waits on the accept to
// acknowledge, so its write is committed first, and the write that waited before it finds
// the event already in the inbox.
func TestAcceptGoesAheadOfTheBotsWrites(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := newHarness(t, bot.Config{})
		entered, release := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			err := h.db.Update(context.Background(), func(bot.Tx) error {
				close(entered)
				<-release
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
		<-entered
		var inboxSeen int
		wg.Go(func() {
			err := h.db.Update(context.Background(), func(tx bot.Tx) error {
				entries, err := tx.Inbox()
				inboxSeen = len(entries)
				return err
			})
			if err != nil {
				t.Error(err)
			}
		})
		synctest.Wait()
		wg.Go(func() {
			ev := bot.Event{Kind: bot.EventMention, ID: "ev-first", Thread: thread, User: ann, Text: "go"}
			if _, err := h.bot.Accept(context.Background(), []bot.Event{ev}); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait()
		close(release)
		wg.Wait()
		if inboxSeen != 1 {
			t.Errorf("the write queued before the accept saw %d inbox entries, want 1: the accept goes first", inboxSeen)
		}
	})
}
