package bot_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// UpdateFencedRelease refuses as Update does: a run's last checkpoint releases its lease.
func (s *refusingStore) UpdateFencedRelease(ctx context.Context, l bot.Lease, fn func(tx bot.Tx) error) error {
	if s.refuse.Load() {
		return errRefused
	}
	return s.DB.UpdateFencedRelease(ctx, l, fn)
}

// releaseCounter is a bbolt store that counts the leases given up in writes of their own.
type releaseCounter struct {
	*store.DB
	released atomic.Int32
}

func (s *releaseCounter) ReleaseLease(ctx context.Context, l bot.Lease) error {
	s.released.Add(1)
	return s.DB.ReleaseLease(ctx, l)
}

// A run that ends gives its lease up in the checkpoint that ends it, not in a write of its
// own; the lease is released all the same, and the run is never claimed again.
func TestEndedRunReleasesItsLeaseInItsLastCheckpoint(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db, err := store.Open(filepath.Join(t.TempDir(), "bot.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s := &releaseCounter{DB: db}
		id := lookRun(t, s, "look once", use("look", `{"q":"a"}`), say("done"))
		time.Sleep(time.Minute) // heartbeats and claims go by
		synctest.Wait()
		l, err := db.Lease(context.Background(), id)
		if err != nil || l.Owner != "" || l.Epoch != 1 {
			t.Errorf("lease of the ended run %+v, %v; want released at epoch 1", l, err)
		}
		if n := s.released.Load(); n != 0 {
			t.Errorf("%d leases released in writes of their own, want the checkpoint to have released it", n)
		}
	})
}

// A run whose last checkpoint the store refuses keeps its lease, renewed, while it waits for
// the store, as a run whose other saves are refused does: no other replica takes it over
// meanwhile, and the bot's stop releases it.
func TestRefusedLastCheckpointKeepsTheLease(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db, st, b, asked := startRefusingBot(t, nil)
		res := mention(t, b, "ev-1", thread, "answer me")
		time.Sleep(5 * time.Minute) // many leases' time
		synctest.Wait()
		if got, n := readStatus(t, db, res.RunID), asked.Load(); got.Terminal() || n != 1 {
			t.Fatalf("the run is %s after %d model calls, want it as last saved after 1", got, n)
		}
		l, err := db.Lease(context.Background(), res.RunID)
		if err != nil || l.Owner == "" || !l.Live(time.Now()) || l.Epoch != 1 {
			t.Errorf("lease of the run waiting for the store %+v, %v; want it held and renewed at epoch 1", l, err)
		}
		// The bot stops with the store still refusing the run's save: the lease is given up
		// for another replica, the last write having given up nothing.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = b.Stop(ctx) // the outbox cannot be flushed while writes are refused
		st.refuse.Store(false)
		if l, err := db.Lease(context.Background(), res.RunID); err != nil || l.Owner != "" {
			t.Errorf("lease once the bot stopped %+v, %v; want released", l, err)
		}
	})
}

// releaseHolder is a bbolt store whose writes that release a lease return only once let
// go, after they committed.
type releaseHolder struct {
	*store.DB
	committed chan struct{}
	hold      chan struct{}
}

func (s *releaseHolder) UpdateFencedRelease(ctx context.Context, l bot.Lease, fn func(tx bot.Tx) error) error {
	err := s.DB.UpdateFencedRelease(ctx, l, fn)
	s.committed <- struct{}{}
	<-s.hold
	return err
}

// A renewal of the lease refused because the run's last checkpoint released it is no
// takeover: the run's goroutine ends as a finished run's does.
func TestRenewalRefusedAfterTheLastCheckpointIsNoTakeover(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db, err := store.Open(filepath.Join(t.TempDir(), "bot.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		s := &releaseHolder{DB: db, committed: make(chan struct{}, 1), hold: make(chan struct{})}
		m := newModel(t)
		m.add(say("done"))
		ag, err := agent.New(agent.Config{MaxSteps: 10, NoProgressSteps: noProgressOff}, m.client, nil)
		if err != nil {
			t.Fatal(err)
		}
		log := &logBuffer{}
		b, err := bot.New(bot.Config{EditInterval: agent.Duration(time.Second)}, s, ag, []bot.Platform{&recorder{}},
			bot.WithLogger(slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo}))))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer b.Stop(context.Background())
		if _, err := b.Handle(context.Background(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "answer"}); err != nil {
			t.Fatal(err)
		}
		<-s.committed
		time.Sleep(time.Minute) // the heartbeat tries to renew the released lease
		synctest.Wait()
		close(s.hold)
		synctest.Wait()
		if !log.has("run finished") || log.has("taken over") {
			t.Errorf("finished logged: %t, a takeover logged: %t; want the run finished, not taken over", log.has("run finished"), log.has("taken over"))
		}
	})
}
