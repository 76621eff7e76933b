package bot

import "context"

// LeaseReleaser is a Leaser that releases a run's lease in the transaction of its owner's
// last write of the run: a run that ends gives its lease up with the checkpoint that ends
// it, one transaction instead of two. A thousand runs ending together were a thousand more
// writes for bbolt's one writer, an eighth of what the runs wrote.
type LeaseReleaser interface {
	// UpdateFencedRelease is UpdateFenced that also releases l, as ReleaseLease does, in
	// the same transaction once fn has succeeded.
	UpdateFencedRelease(ctx context.Context, l Lease, fn func(tx Tx) error) error
}

// writeLast is write for the last write of run id's goroutine, the checkpoint of an ended
// run: on a store that can, it releases the run's lease in the same transaction, and the
// goroutine's end then has nothing to release. The lease is marked first, so that the
// heartbeat takes a renewal refused for it meanwhile for no takeover.
func (s *scheduler) writeLast(ctx context.Context, id string, fn func(tx Tx) error) error {
	var r LeaseReleaser
	if s.own != nil {
		r, _ = s.own.leaser.(LeaseReleaser)
	}
	if r == nil {
		return s.write(ctx, id, fn)
	}
	l, ok := s.own.lease(id)
	if !ok {
		return s.write(ctx, id, fn) // refused, as write says why
	}
	s.own.end(id, true)
	if err := r.UpdateFencedRelease(ctx, l, fn); err != nil {
		s.own.end(id, false)
		return err
	}
	return nil
}

// end marks run id's lease as given up by its last write (on) or no longer so, that write
// having failed.
func (o *ownership) end(id string, on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if on {
		o.ending[id] = true
	} else {
		delete(o.ending, id)
	}
}

// released reports whether run id's last write gives, or gave, its lease up.
func (o *ownership) released(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ending[id]
}
