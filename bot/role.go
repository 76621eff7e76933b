package bot

import (
	"context"
	"time"
)

// Lead runs fn while this replica leads role among the replicas that share the store, and
// always on a store without elections or a store one process holds (bbolt), where it
// leads at once. fn's context ends when the leadership is lost, and fn starts again
// when this replica leads again; Lead returns when ctx ends, resigning the role so that
// another replica takes it at once, or when fn returns on its own, with fn's error.
// Adapters use it for what only one replica may hold, such as Discord's gateway
// connection, which would otherwise deliver every message to every replica.
func (b *Bot) Lead(ctx context.Context, role string, fn func(ctx context.Context) error) error {
	l := &leader{elector: b.lead.elector, role: role, owner: b.lead.owner, ttl: b.lead.ttl, margin: b.lead.margin, now: b.clock.Now, log: b.log}
	defer l.resign(context.WithoutCancel(ctx))
	tick := time.NewTicker(max(l.ttl/3, time.Millisecond))
	defer tick.Stop()
	var (
		stop context.CancelFunc
		done chan error
	)
	halt := func() {
		if stop != nil {
			stop()
			<-done
			stop, done = nil, nil
		}
	}
	defer halt()
	for {
		switch leads := l.holds(ctx); {
		case leads && stop == nil:
			fctx, cancel := context.WithCancel(ctx)
			stop, done = cancel, make(chan error, 1)
			go func() { done <- fn(fctx) }()
		case !leads && stop != nil:
			b.log.Warn("no longer leader; stopping", "role", role)
			halt()
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-done:
			stop()
			stop, done = nil, nil
			return err
		case <-tick.C:
		}
	}
}
