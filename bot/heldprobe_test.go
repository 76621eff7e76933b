package bot_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// TestRunHeldByAnOutageResumesAtTheNextPass refuses the store's writes for a moment as a
// run's step is saved, as a database restart does: once writes go through again, the
// scheduler's next pass (here a second mention's) finds it out and resumes the held run at
// once, instead of after the retry timer's ten seconds.
func TestRunHeldByAnOutageResumesAtTheNextPass(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db, st, b, _ := startRefusingBot(t, nil)
		first := mention(t, b, "ev-1", thread, "answer me")
		time.Sleep(time.Second)
		synctest.Wait()
		if got := readStatus(t, db, first.RunID); got.Terminal() {
			t.Fatalf("the run is %s while the store refused its save, want it held as last saved", got)
		}
		st.refuse.Store(false)
		other := thread
		other.Thread = "T2"
		mention(t, b, "ev-2", other, "and me")
		time.Sleep(time.Second)
		synctest.Wait()
		if got := readStatus(t, db, first.RunID); got != agent.StatusCompleted {
			t.Errorf("a second after the store took writes again (and a pass of the scheduler) the run is %s, want completed", got)
		}
	})
}

// loadRefusingStore fails every load of a whole run from the first one after arm is set
// until refuse is cleared, as a database that goes away between a run's claim and its load
// does, and with it every write unless writes is set, as a damaged record that does not
// decode in a store that works otherwise.
// It gives up refusing after 100 loads, so that a scheduler that tried again at every pass
// fails the test instead of spinning in its bubble.
type loadRefusingStore struct {
	*store.DB
	arm    atomic.Bool
	refuse atomic.Bool
	writes bool
	loads  atomic.Int32 // refused loads
}

func (s *loadRefusingStore) refusing() bool { return s.refuse.Load() && s.loads.Load() < 100 }

func (s *loadRefusingStore) View(ctx context.Context, fn func(tx bot.Tx) error) error {
	return s.DB.View(ctx, func(tx bot.Tx) error {
		if s.arm.Load() || s.refusing() {
			tx = runRefusingTx{tx, s}
		}
		return fn(tx)
	})
}

func (s *loadRefusingStore) Update(ctx context.Context, fn func(tx bot.Tx) error) error {
	if !s.writes && s.refusing() {
		return errRefused
	}
	return s.DB.Update(ctx, fn)
}

func (s *loadRefusingStore) UpdateFenced(ctx context.Context, l bot.Lease, fn func(tx bot.Tx) error) error {
	if !s.writes && s.refusing() {
		return errRefused
	}
	return s.DB.UpdateFenced(ctx, l, fn)
}

// runRefusingTx is a Tx whose Run starts the refusal of its store, if armed, and fails
// while it lasts.
type runRefusingTx struct {
	bot.Tx
	s *loadRefusingStore
}

func (t runRefusingTx) Run(id string) (*bot.RunRecord, error) {
	if t.s.arm.Swap(false) {
		t.s.refuse.Store(true)
	}
	if !t.s.refusing() {
		return t.Tx.Run(id)
	}
	t.s.loads.Add(1)
	return nil, errRefused
}

// TestRunWhoseLoadFailedResumes fails the scheduler's load of a run it has just claimed: the
// run is held, not failed, and it resumes once the store reads again, at the scheduler's
// next pass when one comes soon, or else when its retry timer fires. A run held for good
// would keep its lease, renewed, and never be worked by any replica; and a record that
// does not load while the store takes writes (the probe that releases a held run) is
// loaded again with the save path's backoff, not at every pass.
func TestRunWhoseLoadFailedResumes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes bool          // the store takes writes while the run does not load
		refuse time.Duration // how long loads fail
		pass   bool          // a second mention makes the scheduler pass once the store reads again
		wait   time.Duration // how long after that the run must have completed
		loads  int32         // the most loads that may fail meanwhile
	}{
		{name: "next pass", refuse: time.Second, pass: true, wait: time.Second, loads: 1},
		{name: "retry timer", refuse: time.Second, wait: 11 * time.Second, loads: 1},
		{name: "damaged record", writes: true, refuse: time.Minute, wait: 5 * time.Minute, loads: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				db, err := store.Open(filepath.Join(t.TempDir(), "bot.db"))
				if err != nil {
					t.Fatal(err)
				}
				st := &loadRefusingStore{DB: db, writes: tc.writes}
				m := newModel(t)
				m.srv.SetFallback(llmtest.Func(func(llmtest.Request) llmtest.Step { return llmtest.Text("Done.") }))
				b := startBotOn(t, db, st, m)

				st.arm.Store(true)
				first := mention(t, b, "ev-1", thread, "answer me")
				time.Sleep(tc.refuse)
				synctest.Wait()
				if n := st.loads.Load(); n > tc.loads || n == 0 {
					t.Errorf("the run's load failed %d times in %v, want 1 to %d", n, tc.refuse, tc.loads)
				}
				if got := readStatus(t, db, first.RunID); got.Terminal() {
					t.Fatalf("the run is %s after its load failed, want it held as stored", got)
				}
				st.refuse.Store(false)
				if tc.pass {
					other := thread
					other.Thread = "T2"
					mention(t, b, "ev-2", other, "and me")
				}
				time.Sleep(tc.wait)
				synctest.Wait()
				if got := readStatus(t, db, first.RunID); got != agent.StatusCompleted {
					t.Errorf("%v after the store read again the run is %s, want completed", tc.wait, got)
				}
			})
		})
	}
}
