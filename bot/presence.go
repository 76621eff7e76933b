package bot

import (
	"context"
	"log/slog"
	"time"
)

// presence tells the replicas that share a store which of them are alive: each holds the
// leadership of a role of its own (rolePresence + its ID), renewed every third of the
// lease, as the outbox's leader renews its role. The inbox (inbox.go) needs it: the events
// a replica accepted are its own to handle while it lives, and another replica handles them
// only once its presence lapsed. To adopt a gone replica's events, a replica takes that
// replica's role for the time it replays them, so that two do not adopt them at once.
//
// A store without elections is owned by one process, whose presence is never asked for:
// every replica but this one counts as gone.
type presence struct {
	elector Elector // nil: a store without elections
	owner   string
	ttl     time.Duration
	now     func() time.Time
	log     *slog.Logger
}

// rolePresence prefixes the role of a replica's presence, the replica's ID following it.
const rolePresence = "replica/"

// announce renews this replica's presence. Another replica may hold it for a while: one
// adopting the events an earlier process of the same ID left, which gives it back after.
func (p *presence) announce(ctx context.Context) error {
	if p.elector == nil {
		return nil
	}
	got, err := p.elector.Lead(ctx, rolePresence+p.owner, p.owner, p.now(), p.ttl)
	if err != nil {
		return err
	}
	if got.Owner != p.owner {
		p.log.Info("presence held by a replica adopting an earlier process's events", "replica", p.owner, "holder", got.Owner)
	}
	return nil
}

// adopt reports whether replica id is gone, taking its presence if so: the caller handles
// its events, then calls leave.
func (p *presence) adopt(ctx context.Context, id string) (bool, error) {
	if p.elector == nil {
		return true, nil
	}
	got, err := p.elector.Lead(ctx, rolePresence+id, p.owner, p.now(), p.ttl)
	return err == nil && got.Owner == p.owner, err
}

// leave gives up the presence of replica id, this replica's own as it stops or one it
// adopted.
func (p *presence) leave(ctx context.Context, id string) {
	if p.elector == nil {
		return
	}
	if err := p.elector.Resign(ctx, rolePresence+id, p.owner); err != nil {
		p.log.Warn("give up a replica's presence; it lapses on its own", "replica", id, "err", err)
	}
}

// loop renews this replica's presence every third of the lease until ctx ends and, while
// this replica leads the outbox, adopts what gone replicas left in the inbox, so that a
// replica killed after accepting events loses none of them even when no replica starts
// after it.
func (b *Bot) presenceLoop(ctx context.Context) {
	if b.pres.elector == nil {
		return
	}
	everyThirdOf(ctx, b.pres.ttl, func() {
		if err := b.pres.announce(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("announce this replica's presence", "err", err)
		}
		if b.lead.leads() {
			if err := b.replayInbox(ctx, false); err != nil && ctx.Err() == nil {
				b.log.Warn("inbox: adopt gone replicas' events", "err", err)
			}
		}
	})
}
