package bot

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"time"
)

// dispatcher sends the outbox: it renders every item from the records as they are when it
// is sent, paces the calls to each channel, honours rate limits, redacts secrets and calls
// the Platform. One goroutine (loop) owns all of its state, the pacing of every channel
// included, so that no two calls race for a channel; it therefore needs no lock.
type dispatcher struct {
	store        Store
	platforms    map[string]Platform
	redactor     *Redactor
	log          *slog.Logger
	editInterval time.Duration
	// wake nudges the loop; it has room for one, so a nudge never blocks and many nudges
	// fold into one pass.
	wake chan struct{}
	// flush is closed by Stop: the loop makes a last pass and returns once the outbox is
	// empty. done is closed when the loop has returned.
	flush chan struct{}
	done  chan struct{}

	channels map[string]*channel // by paceKey; the loop's alone
	// lead says whether this replica sends the outbox (leader.go); nil always does.
	lead *leader
}

func newDispatcher(store Store, platforms map[string]Platform, redactor *Redactor, log *slog.Logger, editInterval time.Duration) *dispatcher {
	return &dispatcher{
		store:        store,
		platforms:    platforms,
		redactor:     redactor,
		log:          log,
		editInterval: editInterval,
		wake:         make(chan struct{}, 1),
		flush:        make(chan struct{}),
		done:         make(chan struct{}),
		channels:     map[string]*channel{},
	}
}

// ThreadPaced is implemented by a Platform whose rate limits apply to each thread on its own
// rather than to a whole channel: on Discord a thread is a channel with limits of its own, and
// the web console keeps all its threads in one channel. Without it, calls are paced per
// channel, as Slack's limits are.
type ThreadPaced interface {
	PacedPerThread() bool
}

// paceKey names the pacing state a call to thread t counts against.
func (d *dispatcher) paceKey(t ThreadRef) string {
	if p, ok := d.platforms[t.Platform].(ThreadPaced); ok && p.PacedPerThread() {
		return t.Key()
	}
	return t.Platform + "/" + t.Channel
}

// poke wakes the loop without blocking.
func (d *dispatcher) poke() { poke(d.wake) }

// Retries of platform calls that fail for reasons other than a rate limit back off
// exponentially from retryBase up to retryCap; after maxAttempts the item is dropped, so a
// platform that is down for good does not hold the outbox forever.
const (
	retryBase   = time.Second
	retryCap    = 2 * time.Minute
	maxAttempts = 8
)

// channel is the dispatcher's pacing state for one platform channel.
type channel struct {
	// free is when the channel may be called again: EditInterval after the end of its last
	// call. The platform may have received that call at any moment until it answered, so
	// counting from the end, not the start, is what keeps calls EditInterval apart as the
	// platform sees them, however long each takes.
	free time.Time
	// notBefore holds the channel back after a rate limit (its Retry-After) or a failure
	// (the backoff). Later items of the channel wait too, so messages keep their order.
	notBefore time.Time
	// unsettled are items that reached the platform but could not be settled in the store
	// (a full disk, say), by key: the next pass must edit what was posted, or only settle,
	// rather than post it again.
	unsettled map[string]unsettled
}

// unsettled is what the platform shows of an item the store does not know was sent.
type unsettled struct {
	ref MessageRef // the message posted, if the platform named it
	msg Message    // what it shows, before redaction
}

// loop sends the outbox until ctx ends or, once Stop closed d.flush, until the outbox is
// empty. One goroutine sends everything, so no two calls race for a channel; a channel that
// must wait is skipped, not waited for, so the others keep flowing.
func (d *dispatcher) loop(ctx context.Context) {
	flush, draining := d.flush, false
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next, left := d.pass(ctx)
		if draining && left == 0 || ctx.Err() != nil {
			return
		}
		var wake <-chan time.Time
		if !next.IsZero() {
			timer.Reset(time.Until(next))
			wake = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-flush:
			draining, flush = true, nil
		case <-d.wake:
		case <-wake:
		}
	}
}

// pass sends what pacing allows now, oldest first, and returns when the next item
// may go (zero if nothing waits on time) and how many items are left.
func (d *dispatcher) pass(ctx context.Context) (next time.Time, left int) {
	if !d.lead.holds(ctx) {
		return time.Time{}, 0 // another replica sends the outbox
	}
	var items []OutboxItem
	err := d.store.View(ctx, func(tx Tx) error {
		var err error
		items, err = tx.Outbox()
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			d.log.Error("read outbox", "err", err)
		}
		return time.Now().Add(retryBase), 1
	}
	slices.SortFunc(items, func(a, b OutboxItem) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.Key, b.Key))
	})
	waitFor := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	held, seen, stored := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, it := range items {
		key := d.paceKey(it.Thread)
		seen[key] = true
		stored[it.Key] = true
		if held[key] || ctx.Err() != nil {
			left++
			continue
		}
		ch := d.channels[key]
		if ch == nil {
			ch = &channel{}
			d.channels[key] = ch
		}
		if ready := ch.ready(); time.Now().Before(ready) {
			held[key] = true
			waitFor(ready)
			left++
			continue
		}
		if !d.send(ctx, it, ch) {
			held[key] = true
			waitFor(ch.notBefore)
			left++
		}
	}
	// Settling a sent item is tried again until the store takes it.
	for _, ch := range d.channels {
		for key := range ch.unsettled {
			if !stored[key] {
				delete(ch.unsettled, key)
			}
		}
		if len(ch.unsettled) > 0 {
			waitFor(time.Now().Add(retryBase))
		}
	}
	// Forget channels with nothing to send and nothing to wait for, so a bot that has
	// talked in many channels keeps pacing state only for the busy ones.
	now := time.Now()
	for key, ch := range d.channels {
		if !seen[key] && !now.Before(ch.ready()) {
			delete(d.channels, key)
		}
	}
	return next, left
}

// ready is when the channel may be called next.
func (ch *channel) ready() time.Time {
	if ch.free.After(ch.notBefore) {
		return ch.free
	}
	return ch.notBefore
}

// send renders one item from the current records, posts or edits it, and settles the item.
// It reports whether the item is done; if not, ch.notBefore says when to try again.
func (d *dispatcher) send(ctx context.Context, it OutboxItem, ch *channel) bool {
	log := d.log.With("item", it.Key, "platform", it.Thread.Platform, "channel", it.Thread.Channel)
	p := d.platforms[it.Thread.Platform]
	if p == nil {
		log.Error("outbox item for a platform that is not configured; dropped")
		return d.drop(ctx, it)
	}
	var msg Message
	var existing MessageRef
	err := d.store.View(ctx, func(tx Tx) error {
		var err error
		if msg, err = render(tx, it); err != nil {
			return err
		}
		existing, err = postedRef(tx, it)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		log.Error("render outbox item; dropped", "err", err)
		return d.drop(ctx, it)
	}
	out := d.redactor.message(msg)
	var ref MessageRef
	if u, ok := ch.unsettled[it.Key]; ok {
		if existing.ID == "" {
			// Edit what was posted, and save its reference this time.
			existing, ref = u.ref, u.ref
		}
		if reflect.DeepEqual(u.msg, msg) {
			d.sent(ctx, it, msg, ref, ch)
			return true
		}
	}
	if existing.ID != "" {
		err = p.Update(ctx, existing, out)
	} else {
		ref, err = p.Post(ctx, it.Thread, out)
	}
	// A call that failed may have reached the platform too, so it counts as well.
	ch.free = time.Now().Add(d.editInterval)
	var rl *RateLimitError
	var perm *PermanentError
	switch {
	case err == nil:
		d.sent(ctx, it, msg, ref, ch)
		return true
	case errors.As(err, &rl):
		// Honour Retry-After for this channel only; the item is tried once more after it.
		log.Warn("platform rate limit", "retry_after", rl.RetryAfter)
		ch.notBefore = time.Now().Add(rl.RetryAfter)
		return false
	case errors.As(err, &perm):
		log.Error("platform refused the message for good; dropped", "err", err)
		return d.drop(ctx, it)
	case ctx.Err() != nil:
		return false
	}
	it.Attempts++
	if it.Attempts >= maxAttempts {
		log.Error("platform call kept failing; dropped", "attempts", it.Attempts, "err", err)
		return d.drop(ctx, it)
	}
	backoff := min(retryBase<<(it.Attempts-1), retryCap)
	log.Warn("platform call failed; will retry", "attempts", it.Attempts, "backoff", backoff, "err", err)
	ch.notBefore = time.Now().Add(backoff)
	err = d.store.Update(ctx, func(tx Tx) error {
		// Count the attempt only on the item that failed: a newer card state stored under
		// the same key in the meantime starts afresh.
		cur, ok, err := outboxItem(tx, it.Key)
		if err != nil || !ok || !cur.CreatedAt.Equal(it.CreatedAt) {
			return err
		}
		return tx.PutOutbox(it)
	})
	if err != nil && ctx.Err() == nil {
		log.Error("count outbox attempt", "err", err)
	}
	return false
}

// sent records a message that reached the platform: the reference of a new card, so later
// states edit it in place, and the end of the item. A card item is done only if the records
// still render to what was sent; if they changed meanwhile it stays and goes again. The
// message is out, so this bookkeeping is done even when ctx is ending. If the store refuses
// it, the channel remembers what was sent, so that it is not posted a second time.
func (d *dispatcher) sent(ctx context.Context, it OutboxItem, msg Message, ref MessageRef, ch *channel) {
	err := d.store.Update(context.WithoutCancel(ctx), func(tx Tx) error {
		if ref.ID != "" {
			if err := saveRef(tx, it, ref); err != nil {
				return err
			}
		}
		if it.Kind == OutboxCard || it.Kind == OutboxApprovalCard || it.Kind == OutboxMemory || it.Kind == OutboxAsk {
			if now, err := render(tx, it); err == nil && !reflect.DeepEqual(now, msg) {
				return nil
			}
		}
		return tx.DeleteOutbox(it.Key)
	})
	if err != nil {
		d.log.Error("settle sent outbox item", "item", it.Key, "err", err)
		if ch.unsettled == nil {
			ch.unsettled = map[string]unsettled{}
		}
		ch.unsettled[it.Key] = unsettled{ref: ref, msg: msg}
		return
	}
	delete(ch.unsettled, it.Key)
}

// drop deletes an item that cannot be sent. It reports true: the item is settled.
func (d *dispatcher) drop(ctx context.Context, it OutboxItem) bool {
	err := d.store.Update(ctx, func(tx Tx) error { return tx.DeleteOutbox(it.Key) })
	if err != nil && ctx.Err() == nil {
		d.log.Error("drop outbox item", "item", it.Key, "err", err)
	}
	return true
}

// postedRef is the message an item edits, if it was posted before: the run's status card,
// the approval's card or a memory list. Other items are always new posts.
func postedRef(tx Tx, it OutboxItem) (MessageRef, error) {
	switch it.Kind {
	case OutboxCard:
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

// outboxItem finds the stored item with key.
func outboxItem(tx Tx, key string) (OutboxItem, bool, error) {
	items, err := tx.Outbox()
	if err != nil {
		return OutboxItem{}, false, err
	}
	i := slices.IndexFunc(items, func(it OutboxItem) bool { return it.Key == key })
	if i < 0 {
		return OutboxItem{}, false, nil
	}
	return items[i], true, nil
}
