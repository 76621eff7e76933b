package bot

import (
	"context"
	"fmt"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// expiredReason is what the model is told about a call nobody decided on in time.
const expiredReason = "approval expired"

// sweep expires approvals nobody decided on in time and forgets old event claims, once at
// start (the bot may have been down past some deadlines) and then periodically.
func (b *Bot) sweep(ctx context.Context) {
	every := min(time.Duration(b.cfg.Policy.ApprovalExpiry)/10, time.Minute)
	every = max(every, time.Second)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := b.expireApprovals(ctx); err != nil && ctx.Err() == nil {
			b.log.Error("expire approvals", "err", err)
		}
		if _, err := b.store.PurgeEvents(ctx, b.now()); err != nil && ctx.Err() == nil {
			b.log.Error("purge event claims", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// expireApprovals turns every pending approval past its deadline into a rejection with the
// reason "approval expired", in one transaction, and wakes the runs that can go on.
func (b *Bot) expireApprovals(ctx context.Context) error {
	var waits []time.Duration
	err := b.store.Update(ctx, func(tx Tx) error {
		waits = waits[:0]
		pending, err := tx.Approvals("")
		if err != nil {
			return err
		}
		now := b.stamp()
		for _, ap := range pending {
			if ap.Status != ApprovalPending || now.Before(ap.ExpiresAt) {
				continue
			}
			waits = append(waits, now.Sub(ap.CreatedAt))
			ap.Status, ap.DecidedAt, ap.Reason = ApprovalExpired, now, expiredReason
			if err := tx.PutApproval(ap); err != nil {
				return err
			}
			if err := tx.AppendAudit(AuditEntry{At: now, Actor: User{ID: "loopbot", Name: "loopbot", Bot: true}, Action: "expire",
				RunID: ap.RunID, ApprovalID: ap.ID, CallID: ap.CallID, Tool: ap.Tool, ArgsHash: ap.ArgsHash}); err != nil {
				return err
			}
			if err := b.putOutbox(tx, ap.Thread, now, OutboxItem{Key: "approval/" + ap.ID, Kind: OutboxApprovalCard, RunID: ap.RunID, ApprovalID: ap.ID}); err != nil {
				return err
			}
			rec, err := tx.Run(ap.RunID)
			if err != nil {
				return err
			}
			prev := rec.Status
			if err := rec.State.Decide(ap.CallID, agent.Decision{By: "loopbot", Reason: expiredReason, At: now}); err != nil {
				// The run moved on without this call (it was cancelled, say); the approval
				// still closes.
				b.log.Warn("expired approval of a call that no longer waits", "approval", ap.ID, "err", err)
				continue
			}
			rec.Status = rec.State.Status
			if err := b.transition(tx, rec, prev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("expire approvals: %w", err)
	}
	for _, w := range waits {
		b.decided(ApprovalExpired, w)
	}
	if n := len(waits); n > 0 {
		b.log.Info("approvals expired", "count", n)
		b.poke(b.wakeRuns)
		b.poke(b.wakeOutbox)
	}
	return nil
}
