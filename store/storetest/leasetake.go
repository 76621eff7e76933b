package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// testTakeLease: a run created in a transaction is leased in it (bot.LeaseTaker) at epoch 1,
// and only if the transaction commits; no claim takes it while the lease is live, and its
// owner's fenced writes go through. A run under another replica's live lease is not taken;
// one whose lease expired or was released is taken at the next epoch.
func testTakeLease(t *testing.T, su *suite) {
	s := su.open(t)
	l := leaser(t, s)
	take := func(tx bot.Tx, id, owner string, now time.Duration) (bot.Lease, bool) {
		t.Helper()
		lt, ok := tx.(bot.LeaseTaker)
		if !ok {
			t.Fatalf("%T does not implement bot.LeaseTaker", tx)
		}
		got, taken, err := lt.TakeLease(id, owner, at(now), 30*time.Second)
		if err != nil {
			t.Fatalf("take lease of %s for %s: %v", id, owner, err)
		}
		return got, taken
	}

	// Created and leased in one transaction that fails: neither the run nor its lease is
	// left.
	refused := errors.New("refused")
	err := s.Update(t.Context(), func(tx bot.Tx) error {
		if err := tx.PutRun(newRun("run-1", threadA, agent.StatusRunning, at(0))); err != nil {
			return err
		}
		take(tx, "run-1", "replica-1", 0)
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("failed creation: %v, want its error", err)
	}
	if got, err := l.Lease(t.Context(), "run-1"); !errors.Is(err, bot.ErrNotFound) {
		t.Fatalf("lease after a rolled-back creation: %+v, %v; want none", got, err)
	}

	var held bot.Lease
	update(t, s, func(tx bot.Tx) error {
		if err := tx.PutRun(newRun("run-1", threadA, agent.StatusRunning, at(0))); err != nil {
			return err
		}
		var taken bool
		if held, taken = take(tx, "run-1", "replica-1", 0); !taken {
			t.Errorf("a new run's lease was not taken")
		}
		return nil
	})
	want := bot.Lease{RunID: "run-1", Owner: "replica-1", Epoch: 1, Expires: at(30 * time.Second)}
	if !held.Expires.Equal(want.Expires) || held.RunID != want.RunID || held.Owner != want.Owner || held.Epoch != want.Epoch {
		t.Errorf("lease taken %+v, want %+v", held, want)
	}
	if got, err := l.Lease(t.Context(), "run-1"); err != nil || got.Owner != "replica-1" || got.Epoch != 1 {
		t.Errorf("stored lease %+v, %v; want replica-1's at epoch 1", got, err)
	}
	equal(t, "claims while the taken lease is live", leaseIDs(claim(t, l, "replica-2", 8, time.Second, 30*time.Second)), []string{})
	if err := l.UpdateFenced(t.Context(), held, func(tx bot.Tx) error { return nil }); err != nil {
		t.Errorf("a fenced write under the taken lease: %v", err)
	}

	// Another replica's live lease is not taken, and nothing is written.
	update(t, s, func(tx bot.Tx) error {
		if got, taken := take(tx, "run-1", "replica-2", time.Second); taken {
			t.Errorf("took %+v from under replica-1's live lease", got)
		}
		return nil
	})
	if got, err := l.Lease(t.Context(), "run-1"); err != nil || got.Owner != "replica-1" || got.Epoch != 1 {
		t.Errorf("stored lease after a refused take %+v, %v; want replica-1's at epoch 1", got, err)
	}

	// Expired: taken at the next epoch, which fences the old owner.
	update(t, s, func(tx bot.Tx) error {
		got, taken := take(tx, "run-1", "replica-2", 31*time.Second)
		if !taken || got.Epoch != 2 || got.Owner != "replica-2" {
			t.Errorf("took %+v, %t from an expired lease; want replica-2's at epoch 2", got, taken)
		}
		return nil
	})
	if err := l.UpdateFenced(t.Context(), held, func(tx bot.Tx) error { return nil }); !errors.Is(err, bot.ErrFenced) {
		t.Errorf("the old owner's write after the take: %v, want ErrFenced", err)
	}
}
