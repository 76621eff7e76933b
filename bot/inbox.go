package bot

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// The inbox.
//
// A platform that does not deliver an acknowledged event again (Slack's Socket Mode) must
// not be acknowledged before the event is durable: a process killed between the ack and
// Handle would lose it. So the adapter hands the events that arrived together to Accept,
// which stores them in one step (one disk sync for the batch: a transaction, or the bbolt
// store's intake journal, which its next write transaction moves into the inbox), and
// acknowledges them only after it returns. Each event then goes through Handle as before, and leaves the
// inbox in the transaction that claims it (claimIn) or, for an event Handle takes no claim
// for, right after Handle. What is still in the inbox when the process dies is handled at
// the next Start, in the order it was accepted; Handle's claims make a second handling of
// one event a duplicate.
//
// With replicas, each entry names the replica that accepted it, which handles it: another
// replica that handled it too would make one of the two handlings a duplicate, and the
// person's notice (which only the adapter that took the event can show) could be the lost
// one. So Start replays only this replica's own entries (an earlier process of its ID left
// them) and those of replicas that are gone (presence.go); the outbox's leader adopts gone
// replicas' entries as it goes, too.

// InboxEntry is one accepted event waiting for Handle.
type InboxEntry struct {
	// Seq orders the entries: it grows with every accepted event.
	Seq   int64 `json:"seq"`
	Event Event `json:"event"`
	// Replica is the ID of the replica that accepted it; "" from a version without one.
	Replica string `json:"replica,omitempty"`
}

// inbox is the bot's memory of what it accepted in this process.
type inbox struct {
	mu  sync.Mutex
	seq int64
	// pending are the IDs accepted (or replayed) and not yet handled: Handle removes their
	// entries, and only theirs, so that an event that never was in the inbox costs nothing.
	pending map[string]struct{}
}

// next reserves n sequence numbers and returns the first: at least the clock's nanoseconds,
// so that entries keep their order across a restart, and above every number given before.
func (in *inbox) next(now int64, n int) int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	first := max(in.seq+1, now)
	in.seq = first + int64(n) - 1
	return first
}

func (in *inbox) add(ids ...string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.pending == nil {
		in.pending = make(map[string]struct{})
	}
	for _, id := range ids {
		in.pending[id] = struct{}{}
	}
}

// take reports whether id was pending, and forgets it.
func (in *inbox) take(id string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	_, ok := in.pending[id]
	delete(in.pending, id)
	return ok
}

func (in *inbox) has(id string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	_, ok := in.pending[id]
	return ok
}

// firstUpdater is a store that can put a write ahead of those waiting for the writer: the
// platform waits on Accept's to acknowledge, while the bot's own writes (checkpoints, the
// outbox) wait for nobody. A store without it takes Accept's write in turn.
type firstUpdater interface {
	UpdateFirst(ctx context.Context, fn func(tx Tx) error) error
}

// inboxAccepter is a store that makes accepted events durable on its own, in fewer disk
// syncs than a transaction takes (the bbolt store's intake journal, store/intake.go): it
// stores evs as entries of replica numbered from seq, as AddInbox does each, and reports
// which it added.
type inboxAccepter interface {
	AcceptInbox(ctx context.Context, replica string, seq int64, evs []Event) ([]bool, error)
}

// Accept stores evs in the inbox in one step (one transaction, or one write to a store's
// intake journal) and reports, for each, whether it was added: false for an event whose ID is already waiting there (a redelivery, handled with
// its first delivery). The caller acknowledges the platform after Accept returns nil and
// hands each added event to Handle, in order per thread; an error stores none of them.
func (b *Bot) Accept(ctx context.Context, evs []Event) ([]bool, error) {
	b.mu.Lock()
	stopped := b.stopped
	b.mu.Unlock()
	if stopped {
		return nil, ErrStopped
	}
	for _, ev := range evs {
		if ev.ID == "" {
			return nil, errors.New("accept events: an event without an ID")
		}
	}
	seq := b.inbox.next(b.clock.Now().UnixNano(), len(evs))
	added, err := b.acceptInStore(ctx, seq, evs)
	if err != nil {
		return nil, fmt.Errorf("accept events: %w", err)
	}
	var ids []string
	for i, ev := range evs {
		if added[i] {
			ids = append(ids, ev.ID)
		}
	}
	b.inbox.add(ids...)
	return added, nil
}

// acceptInStore stores evs as inbox entries numbered from seq.
func (b *Bot) acceptInStore(ctx context.Context, seq int64, evs []Event) ([]bool, error) {
	if a, ok := b.store.(inboxAccepter); ok {
		return a.AcceptInbox(ctx, b.pres.owner, seq, evs)
	}
	added := make([]bool, len(evs))
	update := b.store.Update
	if f, ok := b.store.(firstUpdater); ok {
		update = f.UpdateFirst
	}
	err := update(ctx, func(tx Tx) error {
		// One entry serves every event: the store encodes it and keeps nothing of it.
		e := InboxEntry{Replica: b.pres.owner}
		for i, ev := range evs {
			e.Seq, e.Event = seq+int64(i), ev
			var err error
			if added[i], err = tx.AddInbox(&e); err != nil {
				return err
			}
		}
		return nil
	})
	return added, err
}

// settleInbox removes id's entry after Handle, if it was accepted and is still there: the
// event was one Handle takes no claim for (a bot's message, a reply in a thread that is not
// the bot's) or Handle failed, which the adapter has told the person.
func (b *Bot) settleInbox(ctx context.Context, id string) {
	if !b.inbox.take(id) {
		return
	}
	err := b.store.Update(context.WithoutCancel(ctx), func(tx Tx) error { return tx.DeleteInbox(id) })
	if err != nil {
		// The entry is handled again at the next start, where its claim (if it took one)
		// makes it a duplicate.
		b.log.Warn("inbox: remove handled event", "event", id, "err", err)
	}
}

// replayInbox handles, in the order they were accepted, the inbox's events that no live
// replica will handle: at Start this replica's own (an earlier process of its ID accepted
// them) and those without a replica, and always those of replicas that are gone, each of
// which this replica adopts for the time it handles them.
func (b *Bot) replayInbox(ctx context.Context, atStart bool) error {
	var entries []*InboxEntry
	err := b.store.View(ctx, func(tx Tx) error {
		var err error
		entries, err = tx.Inbox()
		return err
	})
	if err != nil {
		return fmt.Errorf("read inbox: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	b.inbox.next(entries[len(entries)-1].Seq, 1)
	gone := map[string]bool{}
	defer func() {
		for id, adopted := range gone {
			if adopted {
				b.pres.leave(context.WithoutCancel(ctx), id)
			}
		}
	}()
	n := 0
	for _, e := range entries {
		switch r := e.Replica; {
		case r == "" || r == b.pres.owner:
			if !atStart {
				continue // being handled here
			}
		default:
			adopted, seen := gone[r]
			if !seen {
				if adopted, err = b.pres.adopt(ctx, r); err != nil {
					return fmt.Errorf("adopt the inbox of replica %s: %w", r, err)
				}
				gone[r] = adopted
				if adopted {
					b.log.Info("inbox: adopting the events of a gone replica", "replica", r)
				}
			}
			if !adopted {
				continue // its live replica handles it
			}
		}
		n++
		b.inbox.add(e.Event.ID)
		res, err := b.Handle(ctx, e.Event)
		switch {
		case err != nil:
			b.log.Error("inbox: handle event accepted before the restart", "event", e.Event.ID, "kind", e.Event.Kind, "replica", e.Replica, "err", err)
		case res.Notice != "":
			// The person is not told: the adapter that would show it is not running yet.
			b.log.Info("inbox: event accepted before the restart handled", "event", e.Event.ID, "notice", res.Notice)
		}
	}
	if n > 0 {
		b.log.Info("inbox: events accepted before the restart handled", "count", n)
	}
	return nil
}
