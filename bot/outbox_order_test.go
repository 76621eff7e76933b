package bot_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// timedCall is one call a timedPlatform got: which message, and when it began and ended.
type timedCall struct {
	channel, text string
	start, end    time.Time
}

// timedPlatform takes took for every post, as over a network, and records when each began
// and ended.
type timedPlatform struct {
	took  time.Duration
	mu    sync.Mutex
	calls []timedCall
}

func (p *timedPlatform) Name() string { return "test" }

func (p *timedPlatform) Post(ctx context.Context, th bot.ThreadRef, msg bot.Message) (bot.MessageRef, error) {
	start := time.Now()
	time.Sleep(p.took)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, timedCall{channel: th.Channel, text: msg.Text, start: start, end: time.Now()})
	return bot.MessageRef{Thread: th, ID: fmt.Sprintf("m%d", len(p.calls))}, nil
}

func (p *timedPlatform) Update(context.Context, bot.MessageRef, bot.Message) error { return nil }

func (p *timedPlatform) Notify(context.Context, bot.ThreadRef, string, string) error { return nil }

// TestChannelsAreCalledAtOnceEachInOrder leaves four notices in each of three channels'
// outbox, interleaved in time, for a platform whose calls take 300ms. The channels are
// called at the same time, but each channel gets its notices one call at a time, in the
// order they were written, EditInterval apart.
func TestChannelsAreCalledAtOnceEachInOrder(t *testing.T) {
	bubble(t, func(t *testing.T) {
		const (
			perChannel = 4
			interval   = time.Second
		)
		db := openStore(t)
		channels := []string{"C1", "C2", "C3"}
		at := time.Now().UTC()
		if err := db.Update(context.Background(), func(tx bot.Tx) error {
			for i := range perChannel {
				for _, c := range channels {
					at = at.Add(time.Millisecond)
					th := bot.ThreadRef{Platform: "test", Channel: c, Thread: "T1"}
					if err := tx.PutOutbox(bot.OutboxItem{Key: fmt.Sprintf("notice/%s-%d", c, i), Kind: bot.OutboxNotice, Thread: th, Text: fmt.Sprint(i), CreatedAt: at}); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		plat := &timedPlatform{took: 300 * time.Millisecond}
		b := startOutboxBot(t, db, bot.Config{EditInterval: agent.Duration(interval)}, plat)
		start := time.Now()
		if err := b.Stop(t.Context()); err != nil {
			t.Fatalf("stop: %v", err)
		}
		synctest.Wait()

		byChannel := map[string][]timedCall{}
		for _, c := range plat.calls {
			byChannel[c.channel] = append(byChannel[c.channel], c)
		}
		for _, ch := range channels {
			calls := byChannel[ch]
			if len(calls) != perChannel {
				t.Fatalf("%s got %d notices, want %d", ch, len(calls), perChannel)
			}
			if !calls[0].start.Equal(start) {
				t.Errorf("%s's first call began %s after the others could, want at once", ch, calls[0].start.Sub(start))
			}
			for i, c := range calls {
				if c.text != fmt.Sprint(i) {
					t.Errorf("%s's call %d posted notice %q, want %d: out of order", ch, i, c.text, i)
				}
				if i > 0 && c.start.Sub(calls[i-1].end) < interval {
					t.Errorf("%s's call %d began %s after call %d ended, want %s at least", ch, i, c.start.Sub(calls[i-1].end), i-1, interval)
				}
			}
		}
		// Each channel's calls follow one another; the three channels' go side by side,
		// so the whole takes what one channel's calls take.
		if took, want := time.Since(start), perChannel*300*time.Millisecond+(perChannel-1)*interval; took != want {
			t.Errorf("the outbox took %s to send, want %s: one channel's calls", took, want)
		}
	})
}

// TestACardThatLooksTheSameIsNotEditedAgain queues a card edit twice for a run that did not
// change in between: the first edit goes out, the second renders as what the card shows
// already, and is settled without a call.
func TestACardThatLooksTheSameIsNotEditedAgain(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		th := bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}
		created := time.Now().UTC()
		queue := func(at time.Time) {
			t.Helper()
			if err := db.Update(context.Background(), func(tx bot.Tx) error {
				return tx.PutOutbox(bot.OutboxItem{Key: "card/run-1", Kind: bot.OutboxCard, RunID: "run-1", Thread: th, CreatedAt: at})
			}); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Update(context.Background(), func(tx bot.Tx) error {
			st := agent.NewState("run-1", "say hello", nil, created)
			st.Status = agent.StatusCompleted
			return tx.PutRun(&bot.RunRecord{ID: "run-1", Thread: th, Requester: ann, Status: st.Status, State: st,
				Card: bot.MessageRef{Thread: th, ID: "m1"}, CreatedAt: created, UpdatedAt: created})
		}); err != nil {
			t.Fatal(err)
		}
		queue(created)
		plat := &recorder{}
		b := startOutboxBot(t, db, bot.Config{}, plat)
		defer b.Stop(context.Background())
		synctest.Wait()
		if n := len(plat.sent("")); n != 1 {
			t.Fatalf("%d calls for the first edit, want 1", n)
		}
		queue(time.Now().UTC())
		// The leader looks at the outbox unasked every third of the lease.
		time.Sleep(11 * time.Second)
		synctest.Wait()
		left := storedOutbox(t, db)
		if n := len(plat.sent("")); n != 1 || len(left) != 0 {
			t.Errorf("%d calls and %d items left after the same card was queued again, want the one edit and none", n, len(left))
		}
	})
}

// undeletableStore is a store on which deleting one outbox item always fails, as a record
// the store cannot write would.
type undeletableStore struct {
	*store.DB
	key string
}

type undeletableTx struct {
	bot.Tx
	key string
}

func (tx undeletableTx) DeleteOutbox(key string) error {
	if key == tx.key {
		return errors.New("delete outbox item: write loopbot.db: input/output error")
	}
	return tx.Tx.DeleteOutbox(key)
}

func (s *undeletableStore) Update(ctx context.Context, fn func(tx bot.Tx) error) error {
	return s.DB.Update(ctx, func(tx bot.Tx) error { return fn(undeletableTx{Tx: tx, key: s.key}) })
}

// TestOneItemTheStoreRefusesDoesNotHoldTheOthers sends three notices at once, in three
// channels, whose "sent" is written in one store write; the store refuses to delete one of
// them. The other two are settled all the same, and none is posted twice.
func TestOneItemTheStoreRefusesDoesNotHoldTheOthers(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		st := &undeletableStore{DB: db, key: "notice/C2"}
		at := time.Now().UTC()
		if err := db.Update(context.Background(), func(tx bot.Tx) error {
			for i, c := range []string{"C1", "C2", "C3"} {
				th := bot.ThreadRef{Platform: "test", Channel: c, Thread: "T1"}
				if err := tx.PutOutbox(bot.OutboxItem{Key: "notice/" + c, Kind: bot.OutboxNotice, Thread: th, Text: "hello " + c, CreatedAt: at.Add(time.Duration(i))}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		plat := &recorder{}
		ag, err := agent.New(agent.Config{}, newModel(t).client, nil)
		if err != nil {
			t.Fatal(err)
		}
		logger := slog.New(slog.NewTextHandler(io.Discard, nil))
		b, err := bot.New(bot.Config{}, st, ag, []bot.Platform{plat}, bot.WithLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			b.Stop(ctx) // the refused item is never flushed
		}()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		for _, c := range []string{"C1", "C2", "C3"} {
			if n := len(plat.callsTo(c)); n != 1 {
				t.Errorf("%s was called %d times, want its notice posted once", c, n)
			}
		}
		var left []string
		if err := db.View(context.Background(), func(tx bot.Tx) error {
			items, err := tx.Outbox()
			for _, it := range items {
				left = append(left, it.Key)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(left) != 1 || left[0] != "notice/C2" {
			t.Errorf("outbox holds %v, want only the item the store cannot delete", left)
		}
	})
}

// viewCounter is a store whose reads take 10ms and that counts how many are made at once.
type viewCounter struct {
	*store.DB
	mu        sync.Mutex
	now, most int
}

func (s *viewCounter) View(ctx context.Context, fn func(tx bot.Tx) error) error {
	s.mu.Lock()
	s.now++
	s.most = max(s.most, s.now)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.now--
		s.mu.Unlock()
	}()
	time.Sleep(10 * time.Millisecond)
	return s.DB.View(ctx, fn)
}

// TestRendersTakeFewStoreReadsAtOnce sends notices in eight channels at once: their calls go
// out together, but the workers read the store two at a time (and the loop once), so that on
// PostgreSQL the dispatcher does not take the pool's connections from the runs.
func TestRendersTakeFewStoreReadsAtOnce(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		st := &viewCounter{DB: db}
		at := time.Now().UTC()
		if err := db.Update(context.Background(), func(tx bot.Tx) error {
			for i := range 8 {
				th := bot.ThreadRef{Platform: "test", Channel: fmt.Sprintf("C%d", i), Thread: "T1"}
				if err := tx.PutOutbox(bot.OutboxItem{Key: fmt.Sprintf("notice/%d", i), Kind: bot.OutboxNotice, Thread: th, Text: "hello", CreatedAt: at.Add(time.Duration(i))}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		plat := &timedPlatform{took: 300 * time.Millisecond}
		ag, err := agent.New(agent.Config{}, newModel(t).client, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := bot.New(bot.Config{}, st, ag, []bot.Platform{plat}, bot.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := b.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if len(plat.calls) != 8 {
			t.Fatalf("%d notices posted, want 8", len(plat.calls))
		}
		if st.most > 3 {
			t.Errorf("%d store reads at once, want at most 3 (two workers' and the loop's)", st.most)
		}
	})
}

// startOutboxBot starts a bot with no tools over db that sends to plat, for the tests of
// what its dispatcher sends; it logs warnings and worse to the test's output.
func startOutboxBot(t *testing.T, db bot.Store, cfg bot.Config, plat bot.Platform) *bot.Bot {
	t.Helper()
	ag, err := agent.New(agent.Config{}, newModel(t).client, nil)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := bot.New(cfg, db, ag, []bot.Platform{plat}, bot.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return b
}

// storedOutbox is what db's outbox holds.
func storedOutbox(t *testing.T, db bot.Store) []bot.OutboxItem {
	t.Helper()
	var items []bot.OutboxItem
	if err := db.View(context.Background(), func(tx bot.Tx) error {
		var err error
		items, err = tx.Outbox()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return items
}
