package slack

import (
	"context"
	"sync"
)

// The batch.
//
// The receiving loop decodes each envelope as it reads it and adds the delivery to the
// batch; the acker takes the whole batch whenever it is free, accepts it in one call (one
// transaction) and acknowledges it. So a burst is accepted in as many transactions as there
// are commits in its time, each the envelopes that arrived during the one before, and an
// envelope costs the loop no hand-off to another goroutine: it wakes the acker only when the
// batch was empty.

// batch is the deliveries decoded and not yet taken by the acker. Its two slices take
// turns, so that a burst allocates none once they have grown.
type batch struct {
	// decoded, if set, is told under mu how many deliveries wait after each add and take
	// (Adapter.decoded, for tests).
	decoded func(waiting int)

	mu     sync.Mutex
	ds     []delivery
	closed bool
	// ready has a token while ds is not empty (or the batch is closed); room has one after
	// the acker took a full batch.
	ready, room chan struct{}
}

func newBatch() *batch {
	return &batch{ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// add appends d and returns how many deliveries wait now. It waits while maxBatch wait,
// which leaves the envelopes that come meanwhile in the socket; false means ctx ended or
// the batch was closed, and d was not added.
func (b *batch) add(ctx context.Context, d delivery) (int, bool) {
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return 0, false
		}
		if len(b.ds) < maxBatch {
			b.ds = append(b.ds, d)
			n := len(b.ds)
			if b.decoded != nil {
				b.decoded(n)
			}
			b.mu.Unlock()
			if n == 1 {
				signal(b.ready)
			}
			return n, true
		}
		b.mu.Unlock()
		select {
		case <-b.room:
		case <-ctx.Done():
			return 0, false
		}
	}
}

// take waits for deliveries and returns them all, handing spare (emptied) to the batch for
// the next ones; false once the batch is closed and empty, or ctx ended (what is left is
// for close to hand back, not to be accepted).
func (b *batch) take(ctx context.Context, spare []delivery) ([]delivery, bool) {
	for {
		if ctx.Err() != nil {
			return nil, false
		}
		b.mu.Lock()
		if len(b.ds) > 0 {
			ds, full := b.ds, len(b.ds) >= maxBatch
			clear(spare[:cap(spare)])
			b.ds = spare[:0]
			if b.decoded != nil {
				b.decoded(0)
			}
			b.mu.Unlock()
			if full {
				signal(b.room)
			}
			return ds, true
		}
		closed := b.closed
		b.mu.Unlock()
		if closed {
			return nil, false
		}
		select {
		case <-b.ready:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// close ends the batch: nothing is added any more, and what is left is returned, for the
// caller to give back.
func (b *batch) close() []delivery {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	ds := b.ds
	b.ds = nil
	signal(b.ready)
	signal(b.room)
	return ds
}

// signal leaves a token in c unless one is there.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
