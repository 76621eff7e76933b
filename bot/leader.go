package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Elector elects one leader per role among replicas that share a store: the dispatcher and
// the sweeper each run on one replica only, so that pacing per channel and Retry-After holds
// are kept by one process and approvals are not expired twice. Both backends implement it;
// on bbolt one process holds the file, and its only bot wins at once.
//
// As with Leaser, every time is the caller's clock.
type Elector interface {
	// Lead makes owner the leader of role until now+ttl if nobody else holds it live (a
	// leader that holds it already is renewed), and returns the role's leadership as stored
	// afterwards: owner leads if and only if its Owner is owner.
	Lead(ctx context.Context, role, owner string, now time.Time, ttl time.Duration) (Leadership, error)
	// Resign gives role up if owner holds it, so another replica takes it at once rather
	// than after the lease expired.
	Resign(ctx context.Context, role, owner string) error
}

// Leadership is who leads a role until when. Term grows by one each time another replica
// (or the same one after its leadership lapsed) takes the role.
type Leadership struct {
	Role    string    `json:"role"`
	Owner   string    `json:"owner"` // "" once resigned
	Term    int64     `json:"term"`
	Expires time.Time `json:"expires"`
}

// Live reports whether someone leads at now.
func (l Leadership) Live(now time.Time) bool { return l.Owner != "" && now.Before(l.Expires) }

// NextLeadership is the rule both backends apply inside the transaction that writes a Lead:
// given the stored leadership (zero if none), it returns the one to store and whether it
// changed. A live leadership of another owner is kept; owner's own is renewed in its term;
// anything else is taken by owner in the next term.
func NextLeadership(stored Leadership, role, owner string, now time.Time, ttl time.Duration) (Leadership, bool) {
	switch {
	case stored.Live(now) && stored.Owner != owner:
		return stored, false
	case stored.Live(now):
		stored.Expires = now.Add(ttl)
		return stored, true
	}
	return Leadership{Role: role, Owner: owner, Term: stored.Term + 1, Expires: now.Add(ttl)}, true
}

// CheckLead checks the arguments of Lead.
func CheckLead(role, owner string, ttl time.Duration) error {
	switch {
	case role == "":
		return errors.New("no role")
	case owner == "":
		return errors.New("no owner")
	case ttl <= 0:
		return fmt.Errorf("leadership ttl must be positive, got %s", ttl)
	}
	return nil
}

// roleOutbox is the role of the leader that runs the dispatcher and the sweeper: one role,
// since both are cheap, and one leader keeps the sweeper's card edits and the dispatcher's
// pacing in one process.
const roleOutbox = "outbox"

// leader is this replica's view of one role. The dispatcher and the sweeper ask it before
// each pass whether they may work (holds); it renews the leadership in that call once a
// third of the lease is gone, so a leader working steadily never lapses, and a replica
// that is not leader tries again at most every retry. Leadership counts only until margin
// before it expires on the bot's clock: the old leader stops that long before a new one
// may start, so that a call the old one made is paced apart from the new one's.
type leader struct {
	elector Elector // nil: a store without elections; this bot always leads
	role    string
	owner   string
	ttl     time.Duration
	margin  time.Duration
	now     func() time.Time
	log     *slog.Logger
	// won is told when this replica becomes leader, so the roles start a pass at once.
	won func()

	mu      sync.Mutex
	held    Leadership
	tried   time.Time // when Lead was last called, for a replica that is not leader
	leading bool
}

// holds reports whether this replica leads now, asking the store when its leadership is
// due for renewal or when it is not leader and has not asked for a while.
func (l *leader) holds(ctx context.Context) bool {
	if l == nil || l.elector == nil {
		return true
	}
	now := l.now()
	l.mu.Lock()
	fresh := l.leading && now.Before(l.held.Expires.Add(-l.ttl*2/3))
	recent := !l.leading && now.Sub(l.tried) < l.ttl/3 && now.After(l.tried)
	l.mu.Unlock()
	if fresh {
		return true
	}
	if recent {
		return false
	}
	return l.elect(ctx, now)
}

// loop asks holds every third of the lease until ctx ends, so that a replica that is not
// leader takes the role within the lease's time once the leader stops renewing it, even
// while its dispatcher and sweeper have nothing to do.
func (l *leader) loop(ctx context.Context) {
	if l == nil || l.elector == nil {
		return
	}
	everyThirdOf(ctx, l.ttl, func() { l.holds(ctx) })
}

// elect asks the store to make this replica leader (or renew it), and reports whether it
// leads. A store error keeps the leadership it had until its margin: a renewal that failed
// once is not a reason to stop, and no other replica can take the role before it expires.
func (l *leader) elect(ctx context.Context, now time.Time) bool {
	got, err := l.elector.Lead(ctx, l.role, l.owner, now, l.ttl)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tried = now
	was := l.leading
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("leader election failed", "role", l.role, "err", err)
		}
		l.leading = was && now.Before(l.held.Expires.Add(-l.margin))
		return l.leading
	}
	l.held = got
	l.leading = got.Owner == l.owner
	switch {
	case l.leading && !was:
		l.log.Info("this replica leads", "role", l.role, "replica", l.owner, "term", got.Term)
		if l.won != nil {
			go l.won()
		}
	case !l.leading && was:
		l.log.Warn("this replica no longer leads", "role", l.role, "replica", l.owner, "leader", got.Owner, "term", got.Term)
	}
	return l.leading
}

// leads reports whether this replica led at its last election, without asking the store.
func (l *leader) leads() bool {
	if l == nil || l.elector == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading
}

// pollOutbox wakes the dispatcher every interval while this replica leads: other replicas
// write outbox items too, and when the store does not notify (or a notification is lost),
// nothing else tells the leader of them, so the leader looks at least that often.
func pollOutbox(ctx context.Context, l *leader, every time.Duration, wake func()) {
	if l == nil || l.elector == nil {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if l.leads() {
				wake()
			}
		}
	}
}

// resign gives the role up, if held, as the bot stops.
func (l *leader) resign(ctx context.Context) {
	if l == nil {
		return
	}
	l.mu.Lock()
	leading := l.leading
	l.leading = false
	l.mu.Unlock()
	if l == nil || l.elector == nil || !leading {
		return
	}
	if err := l.elector.Resign(ctx, l.role, l.owner); err != nil {
		l.log.Warn("resign leadership", "role", l.role, "err", err)
	}
}

// replicate sets up what replicas sharing store need, as far as it offers it: run leases
// for the scheduler (a Leaser) and the election of the outbox's leader (an Elector). A
// store with neither is owned by this process alone.
func (b *Bot) replicate(store Store) {
	owner := b.cfg.ReplicaID
	if owner == "" {
		owner = replicaID()
	}
	ttl := time.Duration(b.cfg.LeaseTTL)
	if l, ok := store.(Leaser); ok {
		b.sched.own = newOwnership(l, owner, ttl, b.clock.Now, b.log)
	}
	b.notes = newNotifier(store, owner)
	e, _ := store.(Elector)
	b.lead = &leader{
		elector: e,
		role:    roleOutbox,
		owner:   owner,
		ttl:     ttl,
		// The old leader stops counting this long before its leadership expires: a
		// call it just made is then at least an edit interval apart from the new
		// leader's first.
		margin: min(max(time.Duration(b.cfg.EditInterval), time.Second), ttl/3),
		now:    b.clock.Now,
		log:    b.log,
		won:    func() { b.disp.poke(); poke(b.sweep.wake) },
	}
	b.disp.lead, b.sweep.lead = b.lead, b.lead
	b.pres = presence{elector: e, owner: owner, ttl: ttl, now: b.clock.Now, log: b.log}
}
