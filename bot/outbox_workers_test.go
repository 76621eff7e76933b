package bot_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// TestSendWorkersStartAsCallsNeedThem checks that the dispatcher starts a worker only when a
// call finds none free: a bot that has sent nothing has none (an idle daemon's resident set
// is smaller by their stacks), and the workers started never exceed the calls that were in
// flight at once, nor the bound on those.
func TestSendWorkersStartAsCallsNeedThem(t *testing.T) {
	tests := []struct {
		channels, want int
	}{
		{0, 0},
		{1, 1},
		{3, 3},
		{40, 16},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.channels, "_channels"), func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				db := openStore(t)
				plat := &timedPlatform{took: 300 * time.Millisecond}
				b := startOutboxBot(t, db, bot.Config{}, plat)
				synctest.Wait()
				if n := bot.SendWorkersStarted(b); n != 0 {
					t.Fatalf("%d send workers started with nothing to send, want none", n)
				}
				at := time.Now().UTC()
				if err := db.Update(context.Background(), func(tx bot.Tx) error {
					for i := range tt.channels {
						th := bot.ThreadRef{Platform: "test", Channel: fmt.Sprintf("C%d", i), Thread: "T1"}
						if err := tx.PutOutbox(bot.OutboxItem{Key: fmt.Sprintf("notice/%d", i), Kind: bot.OutboxNotice, Thread: th, Text: "hello", CreatedAt: at}); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if err := b.Stop(t.Context()); err != nil {
					t.Fatalf("stop: %v", err)
				}
				synctest.Wait()
				if len(plat.calls) != tt.channels {
					t.Fatalf("%d notices sent, want %d", len(plat.calls), tt.channels)
				}
				if n := bot.SendWorkersStarted(b); n != tt.want {
					t.Errorf("%d send workers started for %d channels at once, want %d", n, tt.channels, tt.want)
				}
			})
		})
	}
}
