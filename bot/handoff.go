package bot

import (
	"context"
	"errors"
	"time"
)

// A handoff starts a run on the replica that creates it as soon as its creation commits.
// Without one, a new run waited for the scheduler's next pass to claim it: a write of its
// own, taken one claim after another, so that in a burst of a thousand mentions the last runs
// started a fifth of a second after their creation had committed, doing nothing.
//
// The creator keeps a slot of its scheduler before the creating transaction, so that the
// run never makes the replica work on more than max_concurrent_runs, takes the run's lease in
// that transaction (LeaseTaker), and starts the run's goroutine once it committed. The lease
// is the run's first, taken by the transaction that makes the run, so no other replica can
// have claimed it; it fences the run's writes exactly as a claimed lease does. Without a free
// slot, or on a store whose transactions take no leases, the run is left to the claims of
// whichever replica has room, as before.
type handoff struct {
	s *scheduler
	// now and ttl are the lease's start and length, read when the slot was kept.
	now time.Time
	ttl time.Duration

	// What the creating transaction did, set afresh at every call of it (a store may run a
	// transaction's function more than once): the run it made, and whether it leased it.
	id    string
	lease Lease
	taken bool
	// settled is set by done: the slot was given back, or went to the run.
	settled bool
}

// errAbandoned is the creating transaction's outcome to abandon: a panic left it unknown.
var errAbandoned = errors.New("run creation abandoned")

// reserve keeps a slot for a run about to be created, or returns nil when there is none: the
// scheduler is full, stopped, or not started yet.
func (s *scheduler) reserve() *handoff {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.base == nil || len(s.running)+s.reserved >= s.maxRuns {
		return nil
	}
	s.reserved++
	h := &handoff{s: s}
	if s.own != nil {
		h.now, h.ttl = s.own.now(), s.own.ttl
	}
	return h
}

// reset forgets what an earlier call of the creating transaction's function did.
func (h *handoff) reset() {
	if h != nil {
		h.id, h.lease, h.taken = "", Lease{}, false
	}
}

// take leases run id, being created in tx, to this replica, and reports whether it did: the
// run is then this replica's to start. A transaction that cannot take leases leaves the run
// to the claims, as does a lease that is live (never, for a run tx makes). An error is the
// store's, and fails the transaction.
func (h *handoff) take(tx Tx, id string) (bool, error) {
	if h == nil {
		return false, nil
	}
	h.reset()
	if h.s.own == nil {
		// A store without leases: this process owns every run.
		h.id, h.taken = id, true
		return true, nil
	}
	lt, ok := tx.(LeaseTaker)
	if !ok {
		return false, nil
	}
	l, taken, err := lt.TakeLease(id, h.s.own.owner, h.now, h.ttl)
	if err != nil {
		return false, err
	}
	h.id, h.lease, h.taken = id, l, taken
	return taken, nil
}

// done gives the slot back once the creating transaction returned err: it starts the run
// the transaction leased, if it committed. A run leased while the bot was stopping is
// released at once, so that the next process, or another replica, takes it without waiting
// for the lease to expire.
func (h *handoff) done(ctx context.Context, err error) {
	if h == nil {
		return
	}
	if h.settled {
		return
	}
	h.settled = true
	s := h.s
	taken := err == nil && h.taken
	s.mu.Lock()
	s.reserved--
	stopped := s.stopped
	start := taken && !stopped && s.running[h.id] == nil
	if start {
		if s.own != nil {
			// Set before the goroutine starts: its writes are fenced by the lease.
			s.own.set(h.lease)
		}
		s.spawn(h.id)
	}
	s.mu.Unlock()
	switch {
	case start:
		s.log.Debug("run handed to its creator", "run", h.id)
	case taken && stopped && s.own != nil:
		s.own.set(h.lease)
		s.own.release(ctx, h.id)
	}
}

// abandon gives the slot back unless done did: deferred by the creator, so that a panic in
// its transaction (which the store rolls back) does not keep a slot of the scheduler for good.
func (h *handoff) abandon() {
	if h != nil {
		h.done(context.Background(), errAbandoned)
	}
}
