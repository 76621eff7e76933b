package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// claimBatch is how many runs one claim takes at most. A replica claims only for its free
// slots (max_concurrent_runs, 8 by default), so a burst of runs spreads over the replicas;
// the cap keeps one claim's transaction short for a replica with many slots.
const claimBatch = 32

// ownership is the scheduler's side of run leases (Leaser): the lease of every run this
// replica owns, whether a goroutine works on it or it is held after failed saves. Every
// write a run goroutine makes goes through the run's lease (UpdateFenced), so once another
// replica took the run over with a later epoch, the store refuses it in the same
// transaction and the goroutine stops without writing anything else. Its lock guards only
// the map.
type ownership struct {
	leaser Leaser
	owner  string // this replica's ID
	ttl    time.Duration
	now    func() time.Time
	log    *slog.Logger

	mu     sync.Mutex
	leases map[string]Lease // by run ID
	// ending are the runs whose last write releases their lease (lease_final.go): a
	// renewal refused meanwhile is no takeover.
	ending map[string]bool
}

func newOwnership(l Leaser, owner string, ttl time.Duration, now func() time.Time, log *slog.Logger) *ownership {
	return &ownership{leaser: l, owner: owner, ttl: ttl, now: now, log: log, leases: map[string]Lease{}, ending: map[string]bool{}}
}

func (o *ownership) lease(id string) (Lease, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l, ok := o.leases[id]
	return l, ok
}

func (o *ownership) set(l Lease) {
	o.mu.Lock()
	o.leases[l.RunID] = l
	o.mu.Unlock()
}

func (o *ownership) drop(id string) (Lease, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l, ok := o.leases[id]
	delete(o.leases, id)
	delete(o.ending, id)
	return l, ok
}

// due returns the leases of which a third of the time is gone, to renew. It runs at every
// wake of the scheduler, and with a thousand runs going copying every lease each time was
// most of what a wake allocated.
func (o *ownership) due(now time.Time) []Lease {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []Lease
	for _, l := range o.leases {
		if l.Expires.Sub(now) <= o.ttl*2/3 {
			out = append(out, l)
		}
	}
	return out
}

// appendIdle appends to dst the IDs of the runs owned for which idle is true. o's lock is
// held while idle runs.
func (o *ownership) appendIdle(dst []string, idle func(id string) bool) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	for id := range o.leases {
		if idle(id) {
			dst = append(dst, id)
		}
	}
	return dst
}

func (o *ownership) all() []Lease {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]Lease, 0, len(o.leases))
	for _, l := range o.leases {
		out = append(out, l)
	}
	return out
}

// release gives run id up, unless the store says it is no longer ours, or its last write
// gave it up already, which needs nothing.
func (o *ownership) release(ctx context.Context, id string) {
	released := o.released(id)
	l, ok := o.drop(id)
	if !ok || released {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ttl)
	defer cancel()
	if err := o.leaser.ReleaseLease(ctx, l); err != nil && !errors.Is(err, ErrFenced) {
		o.log.Warn("release run lease; it expires on its own", "run", id, "err", err)
	}
}

// ready returns the runs the loop should start: without leases, every queued or running
// run in the store, oldest first; with them, the runs this replica owns and does not work on
// yet, after renewing its leases that are due and claiming new runs for its free slots.
func (s *scheduler) ready(ctx context.Context) ([]string, error) {
	if s.own == nil {
		var ids []string
		err := s.store.View(ctx, func(tx Tx) error {
			var err error
			ids, err = tx.RunIDs(RunFilter{Statuses: RunnableStatuses})
			return err
		})
		return ids, err
	}
	s.heartbeat(ctx, s.beatDue.Swap(false))
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil, nil
	}
	free := s.maxRuns - len(s.running) - s.reserved
	// The runs this replica owns that no goroutine works on: with a thousand runs going,
	// copying every lease at every wake was most of what the wake allocated. The lease
	// map's lock is taken inside the scheduler's, the order handoffs take them in.
	ids := s.own.appendIdle(s.readyIDs[:0], func(id string) bool { return s.running[id] == nil && !s.held[id] })
	s.readyIDs = ids
	s.mu.Unlock()
	want := min(free-len(ids), claimBatch)
	if want <= 0 {
		return ids, nil
	}
	claimed, err := s.own.leaser.ClaimRuns(ctx, s.own.owner, want, s.own.now(), s.own.ttl)
	if err != nil {
		return ids, fmt.Errorf("claim runs: %w", err)
	}
	for _, l := range claimed {
		// A run this replica works on whose lease lapsed (a renewal failed) is claimed
		// again under a new epoch: its goroutine goes on under the new lease.
		fresh := !s.isRunning(l.RunID)
		s.own.set(l)
		if fresh {
			ids = append(ids, l.RunID)
		}
		s.log.Debug("run claimed", "run", l.RunID, "replica", l.Owner, "epoch", l.Epoch)
	}
	if len(claimed) == want {
		s.poke() // there may be more
	}
	return ids, nil
}

func (s *scheduler) isHeld(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[id]
}

// heartbeat renews the leases of this replica's runs once a third of their time is gone,
// and interrupts a goroutine whose run was taken over (its lease is refused) or, when
// checkEnded is set (on the beat's tick, not every wake), ended by someone else, such as a
// cancel written by another replica.
func (s *scheduler) heartbeat(ctx context.Context, checkEnded bool) {
	now := s.own.now()
	for _, l := range s.own.due(now) {
		renewed, err := s.own.leaser.RenewLease(ctx, l, now, s.own.ttl)
		switch {
		case errors.Is(err, ErrFenced) && s.own.released(l.RunID):
			// The run's last write gave the lease up meanwhile (lease_final.go).
		case errors.Is(err, ErrFenced):
			s.log.Warn("run taken over by another replica; this one stops working on it", "run", l.RunID, "err", err)
			if !s.interrupt(l.RunID, err) {
				// No goroutine works on it (it is held): it is simply no longer ours.
				s.own.drop(l.RunID)
				s.forgetHeld(l.RunID)
			}
		case err != nil:
			if ctx.Err() == nil {
				s.log.Warn("renew run lease", "run", l.RunID, "err", err)
			}
		default:
			s.own.set(renewed)
		}
	}
	if checkEnded {
		s.stopEnded(ctx, "")
	}
}

// stopEnded interrupts the goroutines working on runs that ended in the store meanwhile,
// such as by a cancel another replica wrote: run id, or with id "" every run this replica
// works on. The heartbeat's tick checks them all; a cancel's notification names its run.
func (s *scheduler) stopEnded(ctx context.Context, id string) {
	var ids []string
	if id != "" {
		if s.isRunning(id) {
			ids = append(ids, id)
		}
	} else {
		s.mu.Lock()
		for id := range s.running {
			ids = append(ids, id)
		}
		s.mu.Unlock()
	}
	if len(ids) == 0 {
		return
	}
	var ended []string
	err := s.store.View(ctx, func(tx Tx) error {
		ended = ended[:0]
		for _, id := range ids {
			rec, err := tx.RunHeader(id)
			if err != nil {
				continue // the goroutine reports what it cannot read
			}
			if rec.Status.Terminal() {
				ended = append(ended, id)
			}
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		s.log.Warn("check owned runs", "err", err)
	}
	for _, id := range ended {
		s.log.Info("run ended elsewhere (a cancel from another replica); stopping it here", "run", id)
		s.interrupt(id, agent.ErrCancelled)
	}
}

// beat pokes the loop every third of the lease's time until ctx ends, so that leases are
// renewed and runs other replicas left are claimed while nothing else wakes the loop.
func (s *scheduler) beat(ctx context.Context) {
	if s.own == nil {
		return
	}
	everyThirdOf(ctx, s.own.ttl, func() {
		s.beatDue.Store(true)
		s.poke()
	})
}

// everyThirdOf calls fn every third of a lease's ttl until ctx ends: what renews or asks for
// a lease does it three times within the lease's time, so one late or failed call loses
// nothing.
func everyThirdOf(ctx context.Context, ttl time.Duration, fn func()) {
	tick := time.NewTicker(max(ttl/3, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			fn()
		}
	}
}

// write runs fn in a transaction for run id's goroutine: fenced by the run's lease when
// the store has leases, so that a replica that was taken over writes nothing more. A run
// this replica holds no lease for is refused outright.
func (s *scheduler) write(ctx context.Context, id string, fn func(tx Tx) error) error {
	if s.own == nil {
		return s.store.Update(ctx, fn)
	}
	l, ok := s.own.lease(id)
	if !ok {
		return &FencedError{Held: Lease{RunID: id, Owner: s.own.owner}, Current: Lease{RunID: id}}
	}
	return s.own.leaser.UpdateFenced(ctx, l, fn)
}

// heldLease is this replica's lease of run id; zero without leases or without one.
func (s *scheduler) heldLease(id string) Lease {
	if s.own == nil {
		return Lease{}
	}
	l, _ := s.own.lease(id)
	return l
}

// finished is called as run id's goroutine ends: a held run keeps its lease, so that no
// other replica works on it while this one waits for its store; any other gives it up.
func (s *scheduler) finished(ctx context.Context, id string) {
	if s.own == nil || s.isHeld(id) {
		return
	}
	s.own.release(ctx, id)
}

// releaseAll gives up every lease as the bot stops, so that other replicas take the runs at
// once instead of after the leases expire.
func (s *scheduler) releaseAll(ctx context.Context) {
	if s.own == nil {
		return
	}
	for _, l := range s.own.all() {
		s.own.release(ctx, l.RunID)
	}
}

// replicaID is this process's default replica ID: the host's name and the process ID, which
// say where to look in logs, and a random suffix, so that a restarted process that got the
// same PID (PID 1 in a container) is never mistaken for its predecessor.
func replicaID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "loopbot"
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), NewID()[:6])
}
