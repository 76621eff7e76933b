package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

func factTexts(fs []*bot.MemoryFact) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.Text)
	}
	return out
}

// testMemory keeps facts per channel in the order they were said, apart from other
// channels (one whose key is a prefix of another's included), and forgets them one at a time.
func testMemory(t *testing.T, su *suite) {
	s := su.open(t)
	const chA, chAB = "slack/T1/C1", "slack/T1/C1B"
	fact := func(id, ch, text string, d time.Duration) *bot.MemoryFact {
		return &bot.MemoryFact{ID: id, Channel: ch, Text: text, By: bot.User{ID: "U1"}, At: at(d)}
	}
	update(t, s, func(tx bot.Tx) error {
		return errors.Join(
			tx.PutMemory(fact("f2", chA, "second", time.Second)),
			tx.PutMemory(fact("f1", chA, "first", 0)),
			tx.PutMemory(fact("f3", chAB, "other channel", 0)))
	})
	view(t, s, func(tx bot.Tx) error {
		got, err := tx.Memory(chA)
		if err != nil {
			return err
		}
		equal(t, "memory of C1", factTexts(got), []string{"first", "second"})
		got, err = tx.Memory("slack/T1/C9")
		if err != nil {
			return err
		}
		equal(t, "memory of an empty channel", factTexts(got), []string{})
		f, err := tx.MemoryFact(chAB, "f3")
		if err != nil {
			return err
		}
		equal(t, "one fact", f.Text, "other channel")
		if _, err := tx.MemoryFact(chA, "f3"); !errors.Is(err, bot.ErrNotFound) {
			t.Errorf("a fact looked up in another channel: %v, want ErrNotFound", err)
		}
		return nil
	})
	update(t, s, func(tx bot.Tx) error {
		return errors.Join(tx.DeleteMemory(chA, "f1"), tx.DeleteMemory(chA, "f1"))
	})
	view(t, s, func(tx bot.Tx) error {
		got, err := tx.Memory(chA)
		if err != nil {
			return err
		}
		equal(t, "memory after forgetting", factTexts(got), []string{"second"})
		return nil
	})
	if err := s.Update(t.Context(), func(tx bot.Tx) error { return tx.PutMemory(&bot.MemoryFact{ID: "f9"}) }); err == nil {
		t.Error("a fact without a channel was stored")
	}
}
