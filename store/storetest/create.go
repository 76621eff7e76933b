package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// testCASCreate is twenty first mentions in a thread the bot has never seen, at once: each
// finds no conversation and creates one, and exactly one may. A backend whose put after a
// missing read overwrites (an upsert) lets every one of them win.
func testCASCreate(t *testing.T, su *suite) {
	s := su.open(t)
	ctx := t.Context()
	errs := race(20, func(i int) error {
		return s.Update(ctx, func(tx bot.Tx) error {
			_, err := tx.Conversation(threadB)
			if err == nil {
				return errTaken
			}
			if !errors.Is(err, bot.ErrNotFound) {
				return err
			}
			id := fmt.Sprintf("run-%d", i)
			return tx.PutConversation(&bot.Conversation{Thread: threadB, Runs: []string{id}, Active: id})
		})
	})
	won := winner(t, errs)
	view(t, s, func(tx bot.Tx) error {
		c, err := tx.Conversation(threadB)
		if err != nil {
			return err
		}
		id := fmt.Sprintf("run-%d", won)
		equal(t, "conversation", c, &bot.Conversation{Thread: threadB, Runs: []string{id}, Active: id})
		return nil
	})
}
