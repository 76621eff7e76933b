package bot

import (
	"context"
	"errors"
	"reflect"
	"time"
)

// settle writes what the workers did with the items in d.settling, all in one store write:
// the reference of a new card, so later states edit it in place; the end of an item that was
// sent or dropped; a failed attempt's count. The messages are out, so this bookkeeping is
// done even when ctx is ending. If the write fails, each item is written on its own, so that
// one item the store refuses does not hold the others; a sent item the store still refuses
// is remembered by its channel, so that it is not posted a second time.
func (d *dispatcher) settle(ctx context.Context) {
	batch := d.settling
	if len(batch) == 0 {
		return
	}
	d.settling = nil
	defer func() {
		// The next batch grows in this one's array, which keeps none of its results.
		if d.settling == nil {
			clear(batch)
			d.settling = batch[:0]
		}
	}()
	ctx = context.WithoutCancel(ctx)
	err := d.store.Update(ctx, func(tx Tx) error { return settleAll(tx, batch) })
	if err == nil {
		d.settled(batch)
		return
	}
	if len(batch) > 1 {
		d.log.Warn("settle outbox items together; settling them one by one", "items", len(batch), "err", err)
	}
	// The store refuses writes: the next pass waits, rather than render and settle the
	// same items again at once.
	d.nextScan = time.Now().Add(retryBase)
	d.due(d.nextScan)
	for _, r := range batch {
		one := []result{r}
		err := err
		if len(batch) > 1 {
			err = d.store.Update(ctx, func(tx Tx) error { return settleAll(tx, one) })
		}
		if err == nil {
			d.settled(one)
			continue
		}
		d.log.Error("settle outbox item", "item", r.it.Key, "err", err)
		if r.outcome == outcomeSent {
			ch := d.channel(r.key)
			if ch.unsettled == nil {
				ch.unsettled = map[string]*unsettled{}
			}
			ch.unsettled[r.it.Key] = &unsettled{ref: r.ref, msg: r.msg}
		}
	}
}

// settled forgets the unsettled state of items the store now knows about.
func (d *dispatcher) settled(batch []result) {
	for _, r := range batch {
		if ch := d.channels[r.key]; ch != nil && (r.outcome == outcomeSent || r.outcome == outcomeDrop) {
			delete(ch.unsettled, r.it.Key)
		}
	}
}

// settleAll writes the outcome of every result in batch, inside one transaction. It sets
// nothing outside tx, so it may run again.
func settleAll(tx Tx, batch []result) error {
	var stored map[string]OutboxItem // read once, for failed attempts only
	for _, r := range batch {
		switch r.outcome {
		case outcomeSent:
			if err := settleSent(tx, r); err != nil {
				return err
			}
		case outcomeDrop:
			if err := tx.DeleteOutbox(r.it.Key); err != nil {
				return err
			}
		case outcomeMark:
			// Marks and unmarks are written on items only records write, once each.
			if err := tx.PutOutbox(r.it); err != nil {
				return err
			}
		case outcomeRetry:
			if stored == nil {
				items, err := tx.Outbox()
				if err != nil {
					return err
				}
				stored = make(map[string]OutboxItem, len(items))
				for _, it := range items {
					stored[it.Key] = it
				}
			}
			// Count the attempt only on the item that failed: a newer card state stored
			// under the same key in the meantime starts afresh.
			if cur, ok := stored[r.it.Key]; ok && cur.CreatedAt.Equal(r.it.CreatedAt) {
				if err := tx.PutOutbox(r.it); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// settleSent records one item that reached the platform. A message that is edited later is
// done only if the records still render to what was sent; if they changed meanwhile the
// item stays and goes again.
func settleSent(tx Tx, r result) error {
	if r.ref.ID != "" {
		if err := saveRef(tx, r.it, r.ref); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	if edited(r.it.Kind) {
		switch held, told := cardHeld(tx, r.it); {
		case held:
		case told:
			// Put again since it was listed: the item stays and goes again, rendered
			// then from the newest records, so the writer renders nothing. Should those
			// look as what was sent, the worker finds the channel shows it already
			// (shown) and settles the item without a call.
			return nil
		default:
			if now, err := render(tx, r.it); err == nil && !reflect.DeepEqual(now, r.msg) {
				return nil
			}
		}
	}
	return tx.DeleteOutbox(r.it.Key)
}

// cardHeld reports, for a status card, whether the outbox still holds it as it was listed
// (held), and whether the store could tell (told). Every write that changes what a status
// card shows (a checkpoint, a pause, a question, an autonomy change) puts the card's item
// again, at a new time, so an item still as it was listed means the card's records are
// what the worker rendered (or changed after the render in no way the card shows), and
// one put again means they changed: settling then needs no second render either way, which
// was a sixth of the one writer's time in the makespan scenario. Other kinds, and stores
// that cannot tell, are rendered again.
func cardHeld(tx Tx, it OutboxItem) (held, told bool) {
	h, ok := tx.(OutboxHolder)
	if !ok || it.Kind != OutboxCard {
		return false, false
	}
	held, err := h.OutboxHolds(it)
	return held, err == nil
}

// postedRef is the message an item edits, if it was posted before: the run's status card,
// the approval's card or a memory list. Other items are always new posts. rec is the item's
// run as the same transaction read it to render the item, if it did: a status card's
// reference is read from it rather than from the run's head again.
func postedRef(tx Tx, it OutboxItem, rec *RunRecord) (MessageRef, error) {
	switch it.Kind {
	case OutboxCard:
		if rec != nil && rec.ID == it.RunID {
			return rec.Card, nil
		}
		rec, err := tx.RunHeader(it.RunID)
		if err != nil {
			return MessageRef{}, err
		}
		return rec.Card, nil
	case OutboxApprovalCard:
		ap, err := tx.Approval(it.ApprovalID)
		if err != nil {
			return MessageRef{}, err
		}
		return ap.Card, nil
	case OutboxMemory:
		return memoryCard(tx, it)
	case OutboxAsk:
		return questionCard(tx, it)
	}
	return MessageRef{}, nil
}

// saveRef stores the reference of a newly posted card.
func saveRef(tx Tx, it OutboxItem, ref MessageRef) error {
	switch it.Kind {
	case OutboxCard:
		rec, err := tx.RunHeader(it.RunID)
		if err != nil {
			return err
		}
		rec.Card = ref
		return tx.PutRunHead(rec)
	case OutboxApprovalCard:
		ap, err := tx.Approval(it.ApprovalID)
		if err != nil {
			return err
		}
		ap.Card = ref
		return tx.PutApproval(ap)
	case OutboxMemory:
		return saveMemoryCard(tx, it, ref)
	case OutboxAsk:
		return saveQuestionCard(tx, it, ref)
	}
	return nil
}
