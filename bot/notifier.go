package bot

import (
	"context"
	"time"
)

// Notifier wakes the replicas that share a store when another one wrote something they act
// on, instead of leaving them to find it at their next poll: a cancel for a run another
// replica works on, an outbox item for the leader to send. PostgreSQL implements it with
// LISTEN/NOTIFY, bbolt in the process (its replicas are bots on one handle). A store
// without it is polled, as every store still is: a notification is a hint, delivered at
// most once and possibly not at all (a listener reconnecting, a full queue), so what it
// announces is always committed to the store first and found by the polling too.
type Notifier interface {
	// Notify sends payload on channel to every listener of the store, this process's own
	// listeners included.
	Notify(ctx context.Context, channel, payload string) error
	// Listen returns the notifications sent on channels until ctx ends, when the returned
	// channel closes. Whenever notifications may have been missed (the listener
	// connected, or connected again after a failure), it delivers one with an empty
	// payload on each channel, so that the listener looks at the store again.
	Listen(ctx context.Context, channels ...string) <-chan Notification
}

// Notification is one message of a Notifier.
type Notification struct {
	Channel string
	Payload string
}

// The channels the bot notifies on. Their names are PostgreSQL identifiers.
const (
	// channelOutbox tells the outbox's leader that another replica wrote an item; the
	// payload is the writer's replica ID, so that a replica ignores its own.
	channelOutbox = "loopbot_outbox"
	// channelCancel tells the replica that works on the run in the payload that the run
	// ended in the store (a cancel written elsewhere); an empty payload means any run.
	channelCancel = "loopbot_cancel"
	// ChannelConsole tells the web consoles of every replica that the console's view in
	// the store changed (adapters/web, viewstore.go); the payload is the number of the
	// change, and the consoles read what changed from the store.
	ChannelConsole = "loopbot_console"
	// channelAnswer tells the replica whose call waits on the question in the payload that
	// another replica stored its answer (ask.go); an empty payload means any question.
	channelAnswer = "loopbot_answer"
)

// notifier is the bot's use of a store's Notifier. Outbox changes are coalesced: a burst of
// writes on a replica that does not lead sends one notification, from one goroutine, so
// that no caller waits on the database for it.
type notifier struct {
	n     Notifier // nil: the store does not notify
	owner string
	due   chan struct{}
}

func newNotifier(store Store, owner string) *notifier {
	n, _ := store.(Notifier)
	return &notifier{n: n, owner: owner, due: make(chan struct{}, 1)}
}

// outboxChanged asks the sending loop to tell the leader, if there is a Notifier.
func (n *notifier) outboxChanged() {
	if n.n != nil {
		poke(n.due)
	}
}

// send notifies the leader of outbox changes until ctx ends.
func (n *notifier) send(ctx context.Context, log func(msg string, args ...any)) {
	if n.n == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.due:
			nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := n.n.Notify(nctx, channelOutbox, n.owner); err != nil && ctx.Err() == nil {
				log("notify the outbox's leader; it finds the item at its next poll", "err", err)
			}
			cancel()
		}
	}
}

// notifyCancelled tells the replica working on run id that it ended in the store. A failure is
// only logged: the owner's heartbeat finds the run ended within a third of the lease.
func (b *Bot) notifyCancelled(ctx context.Context, id string) {
	if b.notes.n == nil {
		return
	}
	if err := b.notes.n.Notify(ctx, channelCancel, id); err != nil {
		b.log.Warn("notify a cancel; the run's owner finds it at its heartbeat", "run", id, "err", err)
	}
}

// listen acts on the store's notifications until ctx ends: the leader sends the outbox at
// once when another replica wrote to it, and a run cancelled elsewhere is stopped here.
func (b *Bot) listen(ctx context.Context) {
	if b.notes.n == nil {
		return
	}
	for n := range b.notes.n.Listen(ctx, channelOutbox, channelCancel, channelAnswer) {
		switch n.Channel {
		case channelOutbox:
			if n.Payload != b.notes.owner && b.lead.leads() {
				b.disp.poke()
			}
		case channelCancel:
			b.sched.stopEnded(ctx, n.Payload)
		case channelAnswer:
			b.asks.check(n.Payload)
		}
	}
}

// outboxChanged wakes this replica's dispatcher after an outbox write and, when another
// replica leads, tells that one through the store.
func (b *Bot) outboxChanged() {
	b.disp.poke()
	if !b.lead.leads() {
		b.notes.outboxChanged()
	}
}

// outboxPoll is how often the outbox's leader looks at the outbox unasked: every edit
// interval (1s to 5s) when only polling tells it of other replicas' items, or a third of
// the lease when the store notifies and the poll only makes up for lost notifications.
func (b *Bot) outboxPoll() time.Duration {
	if b.notes.n != nil {
		return max(time.Duration(b.cfg.LeaseTTL)/3, time.Second)
	}
	return min(max(time.Duration(b.cfg.EditInterval), time.Second), 5*time.Second)
}
