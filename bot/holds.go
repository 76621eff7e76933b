package bot

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// HoldStore keeps the dispatcher's holds on channels in the store. A platform's rate limit
// (its Retry-After) holds the channel it was hit on; the leader of the outbox keeps the
// hold in memory to pace its calls, and writes it here so that a replica that takes the
// outbox over (the leader died, was paused or stepped down) honours it too, as does the
// same process after a restart. Both backends implement it; without it holds live in the
// leader's memory only.
//
// Times are the bot's clock, as leases' are.
type HoldStore interface {
	// PutHold stores h under its Key, replacing the hold stored there.
	PutHold(ctx context.Context, h Hold) error
	// Holds lists the stored holds, expired ones included.
	Holds(ctx context.Context) ([]Hold, error)
	// ClearHold removes the hold stored under h.Key if it is still h (same Until), so that
	// clearing a hold that ended never removes a newer one another leader stored meanwhile.
	ClearHold(ctx context.Context, h Hold) error
}

// Hold is a channel (a pace key: the platform and channel, or the thread for a platform
// paced per thread) that no call may reach before Until.
type Hold struct {
	Key   string    `json:"key"`
	Until time.Time `json:"until"`
	// Why is what the platform said, for the operator: "rate limit".
	Why string `json:"why,omitempty"`
}

// CheckHold checks a hold before a backend stores it.
func CheckHold(h Hold) error {
	switch {
	case h.Key == "":
		return errors.New("hold without a key")
	case h.Until.IsZero():
		return fmt.Errorf("hold of %s without an end", h.Key)
	}
	return nil
}

// holdKeeper is the dispatcher's view of the stored holds: it loads them when this replica
// starts to lead the outbox (a new term, or the first pass of a process) and writes the
// holds it sets. Only the loop goroutine uses it.
type holdKeeper struct {
	store HoldStore // nil: holds are kept in memory only
	// now is the bot's clock: stored holds are on it, while the dispatcher paces on the
	// monotonic clock of its process.
	now func() time.Time
	// term is the leadership term the holds were last loaded in; loaded says whether they
	// were loaded at all.
	term   int64
	loaded bool
}

// load reads the stored holds if this is a new term of the leadership, and holds the
// channels they name: a hold the last leader stored is honoured for the time it has left.
// Holds that ended are cleared. A read that fails is tried again at the next pass.
func (d *dispatcher) loadHolds(ctx context.Context) {
	k := &d.holds
	term := d.lead.term()
	if k.loaded && k.term == term {
		return
	}
	if k.term != term {
		// What this replica showed before another led may have been changed since.
		for _, ch := range d.channels {
			ch.shown = nil
		}
		k.term = term
	}
	if k.store == nil {
		k.loaded = true
		return
	}
	holds, err := k.store.Holds(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("read the channels' holds; trying again at the next pass", "err", err)
		}
		return
	}
	k.loaded = true
	now, mono := k.now(), time.Now()
	for _, h := range holds {
		left := h.Until.Sub(now)
		if left <= 0 {
			if err := k.store.ClearHold(ctx, h); err != nil && ctx.Err() == nil {
				d.log.Warn("clear an ended hold", "channel", h.Key, "err", err)
			}
			continue
		}
		ch := d.channel(h.Key)
		if until := mono.Add(left); until.After(ch.notBefore) {
			ch.notBefore = until
		}
		ch.stored = h
		d.log.Info("channel held by the last leader", "channel", h.Key, "for", left.Round(time.Millisecond), "why", h.Why)
	}
}

// hold holds the channel key for d from now, in memory and in the store. A hold that
// cannot be stored is still kept in memory: this leader honours it, and only a new
// leader might not.
func (d *dispatcher) hold(ctx context.Context, key string, ch *channel, wait time.Duration, why string) {
	ch.notBefore = time.Now().Add(wait)
	k := &d.holds
	if k.store == nil {
		return
	}
	h := Hold{Key: key, Until: k.now().Add(wait).UTC(), Why: why}
	if err := k.store.PutHold(context.WithoutCancel(ctx), h); err != nil {
		d.log.Error("store a channel's hold; only this replica honours it", "channel", key, "err", err)
		return
	}
	ch.stored = h
}

// unhold clears the stored hold of a channel that a call reached after the hold ended.
func (d *dispatcher) unhold(ctx context.Context, key string, ch *channel) {
	k := &d.holds
	if k.store == nil || ch.stored.Key == "" {
		return
	}
	if err := k.store.ClearHold(context.WithoutCancel(ctx), ch.stored); err != nil {
		d.log.Warn("clear an ended hold", "channel", key, "err", err)
		return
	}
	ch.stored = Hold{}
}

// term is the leadership's term as this replica last saw it; 0 for a bot that always leads.
func (l *leader) term() int64 {
	if l == nil || l.elector == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held.Term
}
