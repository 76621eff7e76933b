package bot_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// errRefused is what a refusingStore's writes fail with.
var errRefused = errors.New("store update: write loopbot.db: no space left on device")

// refusingStore is a store whose writes fail while refuse is set, as on a full disk.
type refusingStore struct {
	*store.DB
	refuse atomic.Bool
}

func (s *refusingStore) Update(ctx context.Context, fn func(tx bot.Tx) error) error {
	if s.refuse.Load() {
		return errRefused
	}
	return s.DB.Update(ctx, fn)
}

// UpdateFenced refuses as Update does: a run's checkpoints are written through its lease.
func (s *refusingStore) UpdateFenced(ctx context.Context, l bot.Lease, fn func(tx bot.Tx) error) error {
	if s.refuse.Load() {
		return errRefused
	}
	return s.DB.UpdateFenced(ctx, l, fn)
}

// startRefusingBot starts a bot on a new bbolt store behind a refusingStore that begins to
// refuse writes as the model is first asked (as a disk fills, or a database goes away, while
// the model thinks). The model answers the nth request with answer(n) when answer is not
// nil, else with "Done in the end.". It returns the store, its refusing wrapper, the bot and
// the count of model requests.
func startRefusingBot(t *testing.T, answer func(n int32) llmtest.Step) (*store.DB, *refusingStore, *bot.Bot, *atomic.Int32) {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "bot.db"))
	if err != nil {
		t.Fatal(err)
	}
	st := &refusingStore{DB: db}
	asked := new(atomic.Int32)
	m := newModel(t)
	m.srv.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		n := asked.Add(1)
		if n == 1 {
			st.refuse.Store(true)
		}
		if answer != nil {
			return answer(n)
		}
		return llmtest.Text("Done in the end.")
	}))
	return db, st, startBotOn(t, db, st, m), asked
}

// startBotOn starts a bot with no tools that asks m and stores through st, a wrapper of db,
// logging only what is worse than an error; the test's cleanup stops it and closes db.
func startBotOn(t *testing.T, db *store.DB, st bot.Store, m *model) *bot.Bot {
	t.Helper()
	return startBotOnWith(t, bot.Config{}, db, st, m)
}

// startBotOnWith is startBotOn with cfg.
func startBotOnWith(t testing.TB, cfg bot.Config, db *store.DB, st bot.Store, m *model) *bot.Bot {
	t.Helper()
	ag, err := agent.New(agent.Config{}, m.client, nil)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError + 1}))
	b, err := bot.New(cfg, st, ag, []bot.Platform{&recorder{}}, bot.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
		db.Close()
	})
	return b
}

// TestSentMessagesAreNotPostedAgainWhenTheStoreRefusesToSettleThem fills the disk, as it
// were, just as a status card and then an answer reach the platform: the store cannot record
// that they were sent. Neither may be posted a second time; the card is edited in place once
// the store takes writes again, and the answer is only settled.
func TestSentMessagesAreNotPostedAgainWhenTheStoreRefusesToSettleThem(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db, err := store.Open(filepath.Join(t.TempDir(), "bot.db"))
		if err != nil {
			t.Fatal(err)
		}
		st := &refusingStore{DB: db}
		release := make(chan struct{})
		m := newModel(t)
		m.srv.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
			if strings.Contains(r.Messages[len(r.Messages)-1].Content, "first") {
				<-release
			}
			return llmtest.Text("Answer to " + r.Messages[len(r.Messages)-1].Content)
		}))
		ag, err := agent.New(agent.Config{}, m.client, nil)
		if err != nil {
			t.Fatal(err)
		}
		plat := &recorder{}
		var cardPosts, answerPosts atomic.Int32
		plat.fail = func(o op) error {
			if o.kind != "post" || o.ref.Thread != thread {
				return nil
			}
			// The message goes out; the write that records it will fail.
			switch {
			case o.msg.Kind == bot.KindStatus && cardPosts.Add(1) == 1:
				st.refuse.Store(true)
			case o.msg.Kind == bot.KindAnswer && answerPosts.Add(1) == 1:
				st.refuse.Store(true)
			}
			return nil
		}
		logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError + 1}))
		b, err := bot.New(bot.Config{}, st, ag, []bot.Platform{plat}, bot.WithLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := b.Stop(context.Background()); err != nil {
				t.Errorf("stop: %v", err)
			}
			if err := db.Check(context.Background()); err != nil {
				t.Errorf("store check: %v", err)
			}
			db.Close()
		}()
		handle := func(id string, th bot.ThreadRef, text string) {
			t.Helper()
			if _, err := b.Handle(context.Background(), bot.Event{ID: id, Kind: bot.EventMention, Thread: th, User: ann, Text: text}); err != nil {
				t.Fatal(err)
			}
		}

		handle("ev-1", thread, "first goal")
		time.Sleep(5 * time.Second) // the card is posted and cannot be settled: retries
		synctest.Wait()
		if n := cardPosts.Load(); n != 1 {
			t.Fatalf("while the store refused writes the status card was posted %d times, want once", n)
		}
		st.refuse.Store(false)
		time.Sleep(2 * time.Second)
		close(release)
		time.Sleep(5 * time.Second) // the answer is posted and cannot be settled: retries
		synctest.Wait()
		st.refuse.Store(false)
		// Another thread's run wakes the dispatcher, which would post whatever it thinks
		// is still unsent.
		other := bot.ThreadRef{Platform: "test", Channel: "C2", Thread: "T2"}
		handle("ev-2", other, "second goal")
		time.Sleep(10 * time.Second)
		synctest.Wait()

		if n := cardPosts.Load(); n != 1 {
			t.Errorf("the status card was posted %d times, want once and then edited", n)
		}
		if n := answerPosts.Load(); n != 1 {
			t.Errorf("the answer was posted %d times, want once", n)
		}
		cards := plat.sent(bot.KindStatus)
		if card := plat.shown(cards[0].ref.ID); card.Text != "Done" {
			t.Errorf("the status card shows %q, want Done", card.Text)
		}
		if left := storedOutbox(t, db); len(left) != 0 {
			t.Errorf("outbox still holds %+v", left)
		}
	})
}

// mention has ann mention b in th with text, as event id, and fails the test unless the bot
// takes it.
func mention(t *testing.T, b *bot.Bot, id string, th bot.ThreadRef, text string) bot.Result {
	t.Helper()
	res, err := b.Handle(context.Background(), bot.Event{ID: id, Kind: bot.EventMention, Thread: th, User: ann, Text: text})
	if err != nil {
		t.Fatal(err)
	}
	return res
}
