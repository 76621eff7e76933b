package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// Run leases (bot.Leaser): claims, fencing and expiry, on the suite's injected clock.

func leaser(t *testing.T, s bot.Store) bot.Leaser {
	t.Helper()
	l, ok := s.(bot.Leaser)
	if !ok {
		t.Fatalf("%T does not implement bot.Leaser", s)
	}
	return l
}

func claim(t *testing.T, l bot.Leaser, owner string, n int, now time.Duration, ttl time.Duration) []bot.Lease {
	t.Helper()
	got, err := l.ClaimRuns(t.Context(), owner, n, at(now), ttl)
	if err != nil {
		t.Fatalf("%s claims %d at t0+%s: %v", owner, n, now, err)
	}
	return got
}

func leaseIDs(ls []bot.Lease) []string {
	out := []string{}
	for _, l := range ls {
		out = append(out, fmt.Sprintf("%s@%d", l.RunID, l.Epoch))
	}
	return out
}

// putRuns stores runs with the given IDs and statuses, created in that order.
func putRuns(t *testing.T, s bot.Store, runs ...[2]string) {
	t.Helper()
	for i, r := range runs {
		update(t, s, func(tx bot.Tx) error {
			return tx.PutRun(newRun(r[0], threadA, agent.Status(r[1]), at(time.Duration(i)*time.Second)))
		})
	}
}

// testClaimRuns claims runnable runs a few at a time, oldest first: paused and finished runs
// are never claimed, and a run under a live lease is not claimed again.
func testClaimRuns(t *testing.T, su *suite) {
	s := su.open(t)
	l := leaser(t, s)
	// IDs run against creation order, so a backend that claims by ID fails.
	putRuns(t, s,
		[2]string{"run-f", string(agent.StatusQueued)},
		[2]string{"run-e", string(agent.StatusAwaitingApproval)},
		[2]string{"run-d", string(agent.StatusRunning)},
		[2]string{"run-c", string(agent.StatusCompleted)},
		[2]string{"run-b", string(agent.StatusQueued)},
		[2]string{"run-a", string(agent.StatusAwaitingInput)},
		[2]string{"run-0", string(agent.StatusQueued)},
	)
	equal(t, "first claim", leaseIDs(claim(t, l, "replica-1", 2, 0, time.Minute)), []string{"run-f@1", "run-d@1"})
	equal(t, "second claim", leaseIDs(claim(t, l, "replica-2", 5, 0, time.Minute)), []string{"run-b@1", "run-0@1"})
	equal(t, "nothing left", leaseIDs(claim(t, l, "replica-3", 5, time.Second, time.Minute)), []string{})
	got, err := l.Lease(t.Context(), "run-d")
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "stored lease", got, bot.Lease{RunID: "run-d", Owner: "replica-1", Epoch: 1, Expires: at(time.Minute)})
	if _, err := l.Lease(t.Context(), "run-e"); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("lease of a paused run never claimed: got %v, want ErrNotFound", err)
	}
	for _, bad := range []struct {
		owner string
		n     int
		ttl   time.Duration
	}{{"", 1, time.Minute}, {"replica-1", 0, time.Minute}, {"replica-1", 1, 0}} {
		if _, err := l.ClaimRuns(t.Context(), bad.owner, bad.n, t0, bad.ttl); err == nil {
			t.Errorf("claim by %q of %d for %s: no error", bad.owner, bad.n, bad.ttl)
		}
	}
}

// testFencing is a replica that paused past its lease: the run is taken over with a new
// epoch, and the old owner's late checkpoint, renewal and release are refused with a
// *FencedError, leaving the new owner's writes as they are.
func testFencing(t *testing.T, su *suite) {
	s := su.open(t)
	l := leaser(t, s)
	putRuns(t, s, [2]string{"run-1", string(agent.StatusRunning)})
	old := claim(t, l, "replica-1", 1, 0, 30*time.Second)
	if len(old) != 1 {
		t.Fatalf("claimed %v, want run-1", leaseIDs(old))
	}
	checkpoint := func(lease bot.Lease, step int) error {
		return l.UpdateFenced(t.Context(), lease, func(tx bot.Tx) error {
			r, err := tx.Run("run-1")
			if err != nil {
				return err
			}
			r.State.Step = step
			return tx.PutRun(r)
		})
	}
	if err := checkpoint(old[0], 1); err != nil {
		t.Fatalf("checkpoint under the live lease: %v", err)
	}
	// replica-1 pauses; its lease expires and replica-2 takes the run over.
	taken := claim(t, l, "replica-2", 1, 30*time.Second, 30*time.Second)
	equal(t, "takeover", leaseIDs(taken), []string{"run-1@2"})
	if err := checkpoint(taken[0], 2); err != nil {
		t.Fatalf("checkpoint of the new owner: %v", err)
	}
	ran := false
	err := l.UpdateFenced(t.Context(), old[0], func(tx bot.Tx) error {
		ran = true
		r, err := tx.Run("run-1")
		if err != nil {
			return err
		}
		r.State.Step = 99
		return tx.PutRun(r)
	})
	var fenced *bot.FencedError
	if !errors.Is(err, bot.ErrFenced) || !errors.As(err, &fenced) {
		t.Fatalf("late checkpoint of the old owner: got %v, want a *FencedError", err)
	}
	equal(t, "fenced error's current lease", fenced.Current, taken[0])
	if ran {
		t.Error("the fenced checkpoint's function ran")
	}
	view(t, s, func(tx bot.Tx) error {
		r, err := tx.Run("run-1")
		if err != nil {
			return err
		}
		if r.State.Step != 2 {
			t.Errorf("step %d after the late write, want the new owner's 2", r.State.Step)
		}
		return nil
	})
	if _, err := l.RenewLease(t.Context(), old[0], at(31*time.Second), 30*time.Second); !errors.Is(err, bot.ErrFenced) {
		t.Errorf("renewal by the old owner: got %v, want ErrFenced", err)
	}
	if err := l.ReleaseLease(t.Context(), old[0]); !errors.Is(err, bot.ErrFenced) {
		t.Errorf("release by the old owner: got %v, want ErrFenced", err)
	}
	if err := l.ReleaseLease(t.Context(), taken[0]); err != nil {
		t.Fatalf("release by the owner: %v", err)
	}
	if err := checkpoint(taken[0], 3); !errors.Is(err, bot.ErrFenced) {
		t.Errorf("checkpoint under a released lease: got %v, want ErrFenced", err)
	}
	again := claim(t, l, "replica-2", 1, 31*time.Second, time.Minute)
	equal(t, "claim after release", leaseIDs(again), []string{"run-1@3"})
	// A replica restarted under the same ID claims the run again: what its old self
	// still writes is fenced by the epoch alone.
	if err := checkpoint(taken[0], 4); !errors.Is(err, bot.ErrFenced) {
		t.Errorf("checkpoint of the same owner under its older epoch: got %v, want ErrFenced", err)
	}
	if err := checkpoint(again[0], 5); err != nil {
		t.Errorf("checkpoint under the current epoch: %v", err)
	}
	never := bot.Lease{RunID: "run-2", Owner: "replica-1", Epoch: 1, Expires: at(time.Hour)}
	if err := l.UpdateFenced(t.Context(), never, func(bot.Tx) error { return nil }); !errors.Is(err, bot.ErrFenced) {
		t.Errorf("checkpoint under a lease never granted: got %v, want ErrFenced", err)
	}
}

// testLeaseExpiry moves the injected clock across a lease's expiry, renewed once: before it,
// no one else can claim the run; at it, the next claim takes it over with the next epoch.
func testLeaseExpiry(t *testing.T, su *suite) {
	s := su.open(t)
	l := leaser(t, s)
	putRuns(t, s, [2]string{"run-1", string(agent.StatusQueued)})
	held := claim(t, l, "replica-1", 1, 0, 30*time.Second)
	equal(t, "first claim", leaseIDs(held), []string{"run-1@1"})
	equal(t, "claim just before expiry", leaseIDs(claim(t, l, "replica-2", 1, 30*time.Second-time.Nanosecond, 30*time.Second)), []string{})
	renewed, err := l.RenewLease(t.Context(), held[0], at(20*time.Second), 30*time.Second)
	if err != nil {
		t.Fatalf("renew: %v", err)
	}
	equal(t, "renewed lease", renewed, bot.Lease{RunID: "run-1", Owner: "replica-1", Epoch: 1, Expires: at(50 * time.Second)})
	equal(t, "claim after the old expiry, before the renewed one", leaseIDs(claim(t, l, "replica-2", 1, 49*time.Second, 30*time.Second)), []string{})
	equal(t, "claim at the renewed expiry", leaseIDs(claim(t, l, "replica-2", 1, 50*time.Second, 30*time.Second)), []string{"run-1@2"})
	got, err := l.Lease(t.Context(), "run-1")
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "lease after takeover", got, bot.Lease{RunID: "run-1", Owner: "replica-2", Epoch: 2, Expires: at(80 * time.Second)})
	// A lease that expired with nobody taking the run over is still its owner's to renew:
	// the epoch, not the clock, says who may write.
	late, err := l.RenewLease(t.Context(), bot.Lease{RunID: "run-1", Owner: "replica-2", Epoch: 2}, at(90*time.Second), 30*time.Second)
	if err != nil {
		t.Fatalf("renewal of an expired lease nobody took: %v", err)
	}
	equal(t, "lease renewed late", late, bot.Lease{RunID: "run-1", Owner: "replica-2", Epoch: 2, Expires: at(120 * time.Second)})
	equal(t, "claim while the late renewal holds", leaseIDs(claim(t, l, "replica-1", 1, 100*time.Second, 30*time.Second)), []string{})
}

// testClaimsExclusive has eight claimers, on every handle the backend offers, take twenty
// runs three at a time until none is left: each run is claimed exactly once.
func testClaimsExclusive(t *testing.T, su *suite) {
	s := su.open(t)
	handles := []bot.Store{s}
	if su.second != nil {
		handles = append(handles, su.second(t, s))
	}
	var runs [][2]string
	for i := range 20 {
		runs = append(runs, [2]string{fmt.Sprintf("run-%02d", i), string(agent.StatusQueued)})
	}
	putRuns(t, s, runs...)
	var mu sync.Mutex
	claimed := map[string]string{}
	var dup []string
	errs := race(8, func(i int) error {
		l := leaser(t, handles[i%len(handles)])
		owner := fmt.Sprintf("replica-%d", i)
		for {
			got, err := l.ClaimRuns(t.Context(), owner, 3, t0, time.Minute)
			if err != nil {
				return err
			}
			mu.Lock()
			for _, g := range got {
				if prev, ok := claimed[g.RunID]; ok {
					dup = append(dup, fmt.Sprintf("%s by %s and %s", g.RunID, prev, owner))
				}
				claimed[g.RunID] = owner
			}
			left := len(claimed) < len(runs)
			mu.Unlock()
			if len(got) == 0 && !left {
				return nil
			}
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("claimer %d: %v", i, err)
		}
	}
	if len(dup) > 0 {
		t.Errorf("runs claimed twice: %v", dup)
	}
	var ids []string
	for id := range claimed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(ids) != len(runs) {
		t.Errorf("claimed %d runs, want %d: %v", len(ids), len(runs), ids)
	}
}

// testTwoHandles opens a second handle on the same database, as a second replica does: each
// sees what the other committed, and a decision raced from both is taken once.
func testTwoHandles(t *testing.T, su *suite) {
	if su.second == nil {
		t.Skip(su.secondWhy)
	}
	s := su.open(t)
	other := su.second(t, s)
	update(t, s, func(tx bot.Tx) error { return tx.PutApproval(newApproval("ap-1", "run-1", bot.ApprovalPending, t0)) })
	view(t, other, func(tx bot.Tx) error {
		a, err := tx.Approval("ap-1")
		if err != nil {
			t.Fatalf("the other handle does not see the approval: %v", err)
		}
		equal(t, "approval seen by the other handle", a, newApproval("ap-1", "run-1", bot.ApprovalPending, t0))
		return nil
	})
	handles := []bot.Store{s, other}
	errs := race(20, func(i int) error {
		return handles[i%2].Update(t.Context(), func(tx bot.Tx) error {
			a, err := tx.Approval("ap-1")
			if err != nil {
				return err
			}
			if a.Status != bot.ApprovalPending {
				return errTaken
			}
			a.Status, a.DecidedBy = bot.ApprovalApproved, bot.User{ID: fmt.Sprintf("U%d", i)}
			return tx.PutApproval(a)
		})
	})
	won := winner(t, errs)
	view(t, s, func(tx bot.Tx) error {
		a, err := tx.Approval("ap-1")
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("U%d", won); a.DecidedBy.ID != want {
			t.Errorf("decided by %q, want the winner %q", a.DecidedBy.ID, want)
		}
		return nil
	})
	if first, err := other.ClaimEvent(t.Context(), "Ev1", t0, time.Minute); err != nil || !first {
		t.Fatalf("claim on the other handle = %v, %v", first, err)
	}
	if first, err := s.ClaimEvent(t.Context(), "Ev1", t0, time.Minute); err != nil || first {
		t.Errorf("the same event claimed on the first handle = %v, %v; want a duplicate", first, err)
	}
}
