package bot_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// BenchmarkMentionToModel is the time from a mention's Handle to its run's first model
// request, on a bbolt store on disk: what a person waits before the run starts to work.
func BenchmarkMentionToModel(b *testing.B) {
	db, err := store.Open(filepath.Join(b.TempDir(), "bot.db"), store.WithIntake())
	if err != nil {
		b.Fatal(err)
	}
	m := newModel(b)
	asked := make(chan struct{}, 1)
	m.srv.SetFallback(llmtest.Func(func(llmtest.Request) llmtest.Step {
		asked <- struct{}{}
		return say("Done.")
	}))
	bt := startBotOnWith(b, bot.Config{}, db, db, m)
	i := 0
	for b.Loop() {
		i++
		// A channel each: the outbox paces each channel's posts, and the bot's Stop
		// waits for them.
		th := thread
		th.Channel, th.Thread = fmt.Sprintf("C%d", i), fmt.Sprintf("T%d", i)
		if _, err := bt.Handle(context.Background(), bot.Event{ID: fmt.Sprintf("ev-%d", i), Kind: bot.EventMention, Thread: th, User: ann, Text: "do it"}); err != nil {
			b.Fatal(err)
		}
		<-asked
	}
}
