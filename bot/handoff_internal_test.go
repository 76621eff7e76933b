package bot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// leaseLog is a Leaser that leases nothing and records what it is asked: the claims' sizes
// and the leases released.
type leaseLog struct {
	Leaser
	mu       sync.Mutex
	claims   []int
	released []Lease
}

func (l *leaseLog) ClaimRuns(_ context.Context, _ string, n int, _ time.Time, _ time.Duration) ([]Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claims = append(l.claims, n)
	return nil, nil
}

func (l *leaseLog) ReleaseLease(_ context.Context, lease Lease) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.released = append(l.released, lease)
	return nil
}

// takingTx is a Tx that leases any run it is asked for.
type takingTx struct{ Tx }

func (takingTx) TakeLease(runID, owner string, now time.Time, ttl time.Duration) (Lease, bool, error) {
	return Lease{RunID: runID, Owner: owner, Epoch: 1, Expires: now.Add(ttl)}, true, nil
}

// handoffScheduler is a scheduler of maxRuns slots, begun, that owns runs through leases.
func handoffScheduler(maxRuns int) (*scheduler, *leaseLog) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := newScheduler(nil, nil, nil, log, maxRuns, func() {})
	leases := &leaseLog{}
	s.own = newOwnership(leases, "r1", 30*time.Second, time.Now, log)
	s.begin(context.Background())
	return s, leases
}

// TestHandoffSlots: a slot kept for a run being created counts against max_concurrent_runs,
// for other handoffs and for the scheduler's claims, until the creating transaction is done;
// a transaction that failed starts nothing and leaves no lease.
func TestHandoffSlots(t *testing.T) {
	s, leases := handoffScheduler(2)
	h := s.reserve()
	if h == nil {
		t.Fatal("no slot kept with both free")
	}
	if _, err := s.ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(leases.claims) != 1 || leases.claims[0] != 1 {
		t.Errorf("claims with one of two slots kept = %v, want one claim of 1 run", leases.claims)
	}
	if s.reserve() == nil {
		t.Fatal("no second slot kept")
	}
	if extra := s.reserve(); extra != nil {
		t.Error("a third slot was kept of two")
	}
	if taken, err := h.take(takingTx{}, "run-1"); err != nil || !taken {
		t.Fatalf("take = %t, %v", taken, err)
	}
	h.done(t.Context(), context.DeadlineExceeded) // the creating transaction failed
	if s.isRunning("run-1") {
		t.Error("a run whose creation failed was started")
	}
	if _, ok := s.own.lease("run-1"); ok || len(leases.released) != 0 {
		t.Errorf("a run whose creation failed left a lease (released %v)", leases.released)
	}
	if s.reserve() == nil {
		t.Error("the slot of a failed creation was not given back")
	}
}

// TestHandoffAfterStop: a run whose creation commits after the bot began to stop is not
// started, and its lease is released at once, so that the next process takes it without
// waiting for the lease to expire.
func TestHandoffAfterStop(t *testing.T) {
	s, leases := handoffScheduler(8)
	h := s.reserve()
	if taken, err := h.take(takingTx{}, "run-1"); err != nil || !taken {
		t.Fatalf("take = %t, %v", taken, err)
	}
	s.stop()
	h.done(t.Context(), nil)
	if s.isRunning("run-1") {
		t.Error("a run was started after stop")
	}
	if len(leases.released) != 1 || leases.released[0].RunID != "run-1" || leases.released[0].Epoch != 1 {
		t.Errorf("released %+v, want run-1's lease at epoch 1", leases.released)
	}
	if _, ok := s.own.lease("run-1"); ok {
		t.Error("the stopped scheduler still owns run-1")
	}
	if s.reserve() != nil {
		t.Error("a slot was kept after stop")
	}
}

// BenchmarkReadyWithManyRuns is a scheduler pass's look at its leases while a thousand runs
// it owns are all being worked on: it starts nothing and should allocate nothing.
func BenchmarkReadyWithManyRuns(b *testing.B) {
	s, _ := handoffScheduler(2000)
	for i := range 1000 {
		id := fmt.Sprintf("run-%d", i)
		s.own.set(Lease{RunID: id, Owner: "r1", Epoch: 1, Expires: time.Now().Add(time.Hour)})
		s.running[id] = func(error) {}
	}
	s.maxRuns = 1000 // no free slot: no claim
	b.ReportAllocs()
	for b.Loop() {
		ids, err := s.ready(context.Background())
		if err != nil || len(ids) != 0 {
			b.Fatalf("ready = %v, %v; want nothing to start", ids, err)
		}
	}
}

// TestHandoffAbandoned: a creating transaction that panicked gives its slot back and starts
// nothing; done after abandon, or twice, changes nothing more.
func TestHandoffAbandoned(t *testing.T) {
	s, leases := handoffScheduler(1)
	func() {
		defer func() { _ = recover() }()
		h := s.reserve()
		defer h.abandon()
		if _, err := h.take(takingTx{}, "run-1"); err != nil {
			t.Fatal(err)
		}
		panic("a transaction's function panicked")
	}()
	if s.isRunning("run-1") || len(leases.released) != 0 {
		t.Errorf("an abandoned creation started its run or released a lease (%v)", leases.released)
	}
	h := s.reserve()
	if h == nil {
		t.Fatal("the slot of an abandoned creation was not given back")
	}
	h.done(t.Context(), errAbandoned)
	h.abandon()
	h.done(t.Context(), errAbandoned)
	if s.reserved != 0 {
		t.Errorf("%d slots kept after a handoff was settled three times, want 0", s.reserved)
	}
}
