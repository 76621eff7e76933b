package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/loopbot/loopbot/bot"
)

var _ bot.LeaseTaker = (*tx)(nil)

// TakeLease leases a run inside the transaction, as a claim of that one run would.
func (t *tx) TakeLease(runID, owner string, now time.Time, ttl time.Duration) (bot.Lease, bool, error) {
	if t.closed {
		return bot.Lease{}, false, ErrTxClosed
	}
	if err := bot.CheckClaim(owner, 1, ttl); err != nil {
		return bot.Lease{}, false, fmt.Errorf("take lease of run %s: %w", runID, err)
	}
	t.wrote = true // the bucket may be made
	leases, err := t.btx.CreateBucketIfNotExists(bucketRunLeases)
	if err != nil {
		return bot.Lease{}, false, fmt.Errorf("take lease of run %s: %w", runID, err)
	}
	l, err := getLease(leases, runID)
	if err != nil && !errors.Is(err, bot.ErrNotFound) {
		return bot.Lease{}, false, fmt.Errorf("take lease of run %s: %w", runID, err)
	}
	if l.Live(now) {
		return bot.Lease{}, false, nil
	}
	l = bot.Lease{RunID: runID, Owner: owner, Epoch: l.Epoch + 1, Expires: now.Add(ttl)}
	if err := putLease(t, leases, l); err != nil {
		return bot.Lease{}, false, fmt.Errorf("take lease of run %s: %w", runID, err)
	}
	return l, true, nil
}
