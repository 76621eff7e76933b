package bot

import (
	"context"
	"time"
)

// A run held after its first failed save is probed at the scheduler's passes, not only when
// its retry timer fires: a database that went away for a moment (a restart, a failover)
// takes writes again well before storeRetry, and the loop's next claim of runs or renewal of
// leases that goes through says so. The probe is the retry timer's small write, so a store
// that reads but refuses writes (a full disk) still costs no model call; and it stops once
// storeRetry has gone by, where the timer takes over with its backoff.

// probeEarly starts a probe of every run held after its first failed save that is not being
// probed, and forgets those held longer than storeRetry.
func (s *scheduler) probeEarly() {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, since := range s.early {
		switch {
		case s.stopped || !s.held[id] || now.Sub(since) >= storeRetry:
			delete(s.early, id)
		case !s.probing[id]:
			s.probing[id] = true
			go s.probeOnce(id, s.holds[id])
		}
	}
}

// probeOnce probes held run id (its hold-th hold) once and releases it if the store took
// the write; otherwise a later pass or the retry timer tries again.
func (s *scheduler) probeOnce(id string, hold int) {
	err := s.probe(id, storeRetry)
	s.mu.Lock()
	delete(s.probing, id)
	stale := s.stopped || !s.held[id] || s.holds[id] != hold
	s.mu.Unlock()
	if err == nil && !stale {
		s.release(id, hold)
	}
}

// probe writes run id's record, touched, within timeout.
func (s *scheduler) probe(id string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.store.Update(ctx, func(tx Tx) error { return s.recs.touch(tx, id) })
}

// release lets the loop start run id again, held after a failed save (its hold-th), unless
// it was released already.
func (s *scheduler) release(id string, hold int) {
	s.mu.Lock()
	if !s.held[id] || s.holds[id] != hold {
		s.mu.Unlock()
		return
	}
	delete(s.held, id)
	delete(s.early, id)
	s.mu.Unlock()
	s.log.Info("held run: the store takes writes again; resuming", "run", id)
	s.poke()
}

// forgetHeld forgets run id, held here and taken over by another replica: it waits for no
// save of this replica's any more, so the health check no longer reports it.
func (s *scheduler) forgetHeld(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, id)
	delete(s.early, id)
	delete(s.unsaved, id)
	delete(s.saveFailures, id)
	delete(s.loadFailures, id)
}
