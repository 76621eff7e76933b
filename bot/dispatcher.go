package bot

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// dispatcher sends the outbox: it renders every item from the records as they are when it
// is sent, paces the calls to each channel, honours rate limits, redacts secrets and calls
// the Platform. One goroutine (loop) owns all of its state, the pacing of every channel
// included, and hands the calls to a few workers: a channel has at most one call in flight,
// so its messages keep their order and its pacing, while different channels are called at
// the same time. The loop therefore needs no lock.
type dispatcher struct {
	store        Store
	platforms    map[string]Platform
	redactor     *Redactor
	log          *slog.Logger
	editInterval time.Duration
	// workers is how many calls may be in flight at once, each to another channel; render
	// has room for the workers that may read the store at once.
	workers int
	render  chan struct{}
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
	// holds are the channels' holds as stored, for the replica that leads next (holds.go).
	holds holdKeeper

	// The loop's bookkeeping of its workers: jobs go out, results come back, inflight
	// counts the calls whose result the loop has not taken yet, and settling collects the
	// items whose outcome is to be written in the loop's next store write. started counts
	// the workers started so far (atomic for tests to read) and startWorker starts one more: a worker starts when a
	// call finds none free, so a bot that has sent nothing has none, and one that never
	// had more than a few calls in flight at once has only a few.
	jobs        chan job
	results     chan result
	inflight    int
	started     atomic.Int32
	startWorker func()
	settling    []result
	// queue holds the items the last pass found ready, one a channel, oldest first, for
	// the workers as they come free: a thousand ready channels are read once, not once
	// for every few workers' worth. next is when a channel with items waiting may be
	// called again.
	queue []job
	next  time.Time
	// listed is a pass's list of the outbox, kept from one pass to the next so that a pass
	// over a thousand items does not grow a list afresh. A pass keeps no sets of what it
	// saw: a channel's count of items (channel.waiting) tells its first item and whether
	// it had any.
	listed []OutboxItem
	// nextScan is when the loop may read the outbox again: a pass reads every waiting item,
	// so passes are spaced by a few times what the last one took (scanSpacing), and a
	// burst of wakes does not make the loop spend its time reading the same items again.
	nextScan time.Time
}

// renderSlots bounds the workers that read the store at once to render an item: rendering
// is the process's own work, so more than the cores gain nothing, and on PostgreSQL each read
// holds one of the pool's few connections (4 on 2 cores), which the runs' checkpoints need.
const renderSlots = 2

// sendWorkers bounds the platform calls in flight at once. Each is to another channel, and
// a chat platform's call takes tens to hundreds of milliseconds over the network, so a
// handful keeps a thousand busy channels flowing without flooding the platform.
const sendWorkers = 16

func newDispatcher(store Store, platforms map[string]Platform, redactor *Redactor, log *slog.Logger, editInterval time.Duration, now func() time.Time) *dispatcher {
	hs, _ := store.(HoldStore)
	return &dispatcher{
		store:        store,
		platforms:    platforms,
		redactor:     redactor,
		log:          log,
		editInterval: editInterval,
		workers:      sendWorkers,
		render:       make(chan struct{}, renderSlots),
		wake:         make(chan struct{}, 1),
		flush:        make(chan struct{}),
		done:         make(chan struct{}),
		channels:     map[string]*channel{},
		holds:        holdKeeper{store: hs, now: now},
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
	// stored is the rate limit's hold as written to the store, until a call clears it.
	stored Hold
	// busy says a worker is calling the channel: its next item waits for the result, so
	// that the channel's messages reach the platform one at a time and in order.
	busy bool
	// unsettled are items that reached the platform but could not be settled in the store
	// (a full disk, say), by key: the next pass must edit what was posted, or only settle,
	// rather than post it again.
	unsettled map[string]*unsettled
	// waiting counts the channel's items the last pass read.
	waiting int
	// shown is what this leader last showed in each message it edits, by item key: a card
	// whose new state renders as what it shows already is settled without a call.
	shown map[string]*unsettled
}

// maxShown bounds a channel's memory of what it shows; past it the memory starts afresh,
// which costs at most one edit each that changes nothing a person sees.
const maxShown = 64

// unsettled is what the platform shows of an item the store does not know was sent.
type unsettled struct {
	ref MessageRef // the message posted, if the platform named it
	msg Message    // what it shows, before redaction
}

// channel returns the pacing state of key, made if there is none.
func (d *dispatcher) channel(key string) *channel {
	ch := d.channels[key]
	if ch == nil {
		ch = &channel{}
		d.channels[key] = ch
	}
	return ch
}

// loop sends the outbox until ctx ends or, once Stop closed d.flush, until the outbox is
// empty. It reads the outbox, hands each channel's oldest item to a worker when the
// channel's pacing allows, and writes what the workers did in one store write for many
// items; a channel that must wait is skipped, not waited for, so the others keep flowing.
func (d *dispatcher) loop(ctx context.Context) {
	d.jobs = make(chan job)
	// A worker never waits to hand its result back: there are never more results
	// outstanding than workers.
	d.results = make(chan result, d.workers)
	var workers sync.WaitGroup
	d.started.Store(0)
	d.startWorker = func() {
		d.started.Add(1)
		workers.Add(1)
		go func() {
			defer workers.Done()
			for j := range d.jobs {
				d.results <- d.call(ctx, j)
			}
		}()
	}
	defer func() {
		// The calls in flight end (ctx ended, or there were none); what reached the
		// platform is still settled.
		close(d.jobs)
		for ; d.inflight > 0; d.inflight-- {
			d.finish(ctx, <-d.results)
		}
		d.settle(ctx)
		workers.Wait()
	}()

	flush, draining := d.flush, false
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	want, left := true, 0
	for {
		d.settle(ctx)
		if ctx.Err() != nil {
			return
		}
		if want && !time.Now().Before(d.nextScan) {
			start := time.Now()
			var read int
			d.next, left, read = d.pass(ctx)
			want = false
			d.nextScan = time.Now().Add(scanGap(time.Since(start), read))
		}
		if draining && !want && left == 0 && d.inflight == 0 && len(d.queue) == 0 && len(d.settling) == 0 {
			return
		}
		at := d.next
		if want && (at.IsZero() || d.nextScan.Before(at)) {
			at = d.nextScan
		}
		var tick <-chan time.Time
		if !at.IsZero() {
			timer.Reset(time.Until(at))
			tick = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-flush:
			draining, flush, want = true, nil, true
		case <-d.wake:
			want = true
		case <-tick:
			want, d.next = true, time.Time{}
		case r := <-d.results:
			// Take what else is done too, so that one write settles it all.
			for more := true; more; {
				d.inflight--
				if d.finish(ctx, r) {
					want = true
				}
				select {
				case r = <-d.results:
				default:
					more = false
				}
			}
			d.feed(ctx)
			// A last pass sees whether the outbox is empty now.
			want = want || draining
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// Reading the outbox decodes every waiting item, so the loop spaces its reads: after a read
// that took a while, by scanSpacing times what it took; after a read of many items, by
// scanPerItem for each (50ms for a thousand), so that a busy store's stream of wakes does
// not make the loop read the same thousand items again and again. An outbox of up to
// scanFree items is read at every wake: a new item in a quiet channel goes at once.
const (
	scanSpacing = 4
	scanFree    = 64
	scanPerItem = 50 * time.Microsecond
)

// scanGap is how long the loop waits after a read of n items that took took before it
// reads the outbox again for a wake. A due channel (the timer) waits for it too.
func scanGap(took time.Duration, n int) time.Duration {
	gap := scanSpacing * took
	if n > scanFree {
		gap = max(gap, time.Duration(n)*scanPerItem)
	}
	return gap
}

// due makes the loop read the outbox again at t, if not sooner.
func (d *dispatcher) due(t time.Time) {
	if d.next.IsZero() || t.Before(d.next) {
		d.next = t
	}
}

// pass hands out what pacing allows now, oldest first, one item a channel, and returns
// when the next item may go (zero if nothing waits on time), how many items are left, and
// how many it read.
func (d *dispatcher) pass(ctx context.Context) (next time.Time, left, read int) {
	if !d.lead.holds(ctx) {
		d.queue = d.queue[:0]
		return time.Time{}, 0, 0 // another replica sends the outbox
	}
	d.loadHolds(ctx)
	var items []OutboxItem
	err := d.store.View(ctx, func(tx Tx) error {
		var err error
		if a, ok := tx.(OutboxAppender); ok {
			items, err = a.AppendOutbox(d.listed[:0])
		} else {
			items, err = tx.Outbox()
		}
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			d.log.Error("read outbox", "err", err)
		}
		return time.Now().Add(retryBase), 1, 0
	}
	d.queue = d.queue[:0]
	for _, ch := range d.channels {
		ch.waiting = 0
	}
	slices.SortFunc(items, func(a, b OutboxItem) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.Key, b.Key))
	})
	waitFor := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	now := time.Now()
	for _, it := range items {
		key := d.paceKey(it.Thread)
		ch := d.channel(key)
		ch.waiting++
		// Whatever happens to a channel's first item, its later items wait for it.
		if ch.waiting > 1 || ctx.Err() != nil {
			left++
			continue
		}
		switch ready := ch.ready(); {
		case ch.busy:
			// Its call's result wakes the loop.
			left++
			continue
		case now.Before(ready):
			waitFor(ready)
			left++
			continue
		}
		p := d.platforms[it.Thread.Platform]
		if p == nil {
			d.log.Error("outbox item for a platform that is not configured; dropped", "item", it.Key, "platform", it.Thread.Platform)
			d.settling = append(d.settling, result{job: job{it: it, key: key}, outcome: outcomeDrop})
			continue
		}
		j := job{it: it, key: key, p: p}
		if u := ch.unsettled[it.Key]; u != nil {
			j.unsettled = u
		}
		if s := ch.shown[it.Key]; s != nil {
			j.shown = s
		}
		d.queue = append(d.queue, j)
		left++
	}
	d.feed(ctx)
	var stored map[string]bool // the keys listed, made only for a channel with unsettled items
	for key, ch := range d.channels {
		if len(ch.unsettled) > 0 {
			// Settling a sent item is tried again until the store takes it, or the
			// item is gone.
			if stored == nil {
				stored = make(map[string]bool, len(items))
				for _, it := range items {
					stored[it.Key] = true
				}
			}
			for k := range ch.unsettled {
				if !stored[k] {
					delete(ch.unsettled, k)
				}
			}
			if len(ch.unsettled) > 0 {
				waitFor(time.Now().Add(retryBase))
				continue
			}
		}
		// Forget channels with nothing to send and nothing to wait for, so a bot that has
		// talked in many channels keeps pacing state only for the busy ones.
		if ch.waiting == 0 && !ch.busy && !now.Before(ch.ready()) {
			delete(d.channels, key)
		}
	}
	read = len(items)
	clear(items) // the jobs have their copies
	d.listed = items[:0]
	if read <= scanFree {
		// The list a burst grew is not kept once the outbox is small again.
		d.listed = nil
	}
	return next, left, read
}

// feed hands queued items to the workers while some are free. An item whose channel came to
// be held meanwhile stays in the outbox for a later pass. The new posts among them are
// marked in the store first (outbox_intent.go), in the write that settles what the workers
// did last.
func (d *dispatcher) feed(ctx context.Context) {
	now := time.Now()
	var out []job
	for d.inflight+len(out) < d.workers && len(d.queue) > 0 {
		j := d.queue[0]
		d.queue = d.queue[1:]
		ch := d.channel(j.key)
		if ch.busy {
			continue
		}
		if ready := ch.ready(); now.Before(ready) {
			d.due(ready)
			continue
		}
		ch.busy = true
		if d.mark(&j) {
			d.settling = append(d.settling, result{job: j, outcome: outcomeMark})
		}
		out = append(out, j)
	}
	if len(out) == 0 {
		return
	}
	// A mark that cannot be written leaves the call as it was before marks: a sender
	// after this one would post again without saying it may repeat.
	d.settle(ctx)
	for _, j := range out {
		d.inflight++
		// A worker is busy from taking a job until the loop has taken its result, so
		// fewer workers than calls in flight means none is free.
		if int(d.started.Load()) < d.inflight {
			d.startWorker()
		}
		d.jobs <- j
	}
}

// ready is when the channel may be called next.
func (ch *channel) ready() time.Time {
	if ch.free.After(ch.notBefore) {
		return ch.free
	}
	return ch.notBefore
}
