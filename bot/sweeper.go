package bot

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// sweeper expires approvals nobody decided on in time and forgets old event claims, once at
// start (the bot may have been down past some deadlines) and then periodically. It keeps no
// state of its own between passes: each pass reads the store, so it needs no lock.
type sweeper struct {
	store Store
	recs  *records
	log   *slog.Logger
	every time.Duration
	// decided is told of every expiry after it is stored (WithDecisionHook).
	decided func(outcome ApprovalStatus, wait time.Duration)
	// settled is told after approvals expired, so the runs go on and the cards are edited.
	settled func()
	// lead says whether this replica sweeps (leader.go); nil always does.
	lead *leader
	// wake starts a pass at once: this replica has just become leader.
	wake chan struct{}
}

func newSweeper(store Store, recs *records, log *slog.Logger, expiry time.Duration, decided func(ApprovalStatus, time.Duration), settled func()) *sweeper {
	every := min(expiry/10, time.Minute)
	return &sweeper{store: store, recs: recs, log: log, every: max(every, time.Second), decided: decided, settled: settled, wake: make(chan struct{}, 1)}
}

// loop sweeps until ctx ends.
func (s *sweeper) loop(ctx context.Context) {
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	for {
		if s.lead.holds(ctx) {
			s.pass(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.wake:
		}
	}
}

// pass expires approvals and purges event claims once.
func (s *sweeper) pass(ctx context.Context) {
	if err := s.expireApprovals(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("expire approvals", "err", err)
	}
	if _, err := s.store.PurgeEvents(ctx, s.recs.clock.Now()); err != nil && ctx.Err() == nil {
		s.log.Error("purge event claims", "err", err)
	}
}

// expireApprovals turns every pending approval past its deadline into a rejection with the
// reason "approval expired", in one transaction, and wakes the runs that can go on.
func (s *sweeper) expireApprovals(ctx context.Context) error {
	var waits []time.Duration
	err := s.store.Update(ctx, func(tx Tx) error {
		var err error
		waits, err = s.recs.expireDue(tx)
		return err
	})
	if err != nil {
		return fmt.Errorf("expire approvals: %w", err)
	}
	for _, w := range waits {
		s.decided(ApprovalExpired, w)
	}
	if n := len(waits); n > 0 {
		s.log.Info("approvals expired", "count", n)
		s.settled()
	}
	return nil
}
