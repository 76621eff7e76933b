package slack

import (
	"context"
	"sync"
	"time"
)

// The intake.
//
// A burst of envelopes and the runs it starts compete for the same cores: each job a
// worker hands to the bot starts a run (model calls, checkpoints, cards), and every
// goroutine of those runs is ahead of the receiving loop in the scheduler's queue whenever
// the loop wakes for the next frame. Slack gives an acknowledgement 3 seconds and a run
// takes seconds anyway, so the acks come first: while envelopes that were read wait for
// their acknowledgement, the workers hold the jobs already acknowledged. A hold ends when
// nothing has been pending for intakeLinger (the reader is often ahead of the sender, and a
// burst's envelopes arrive a few tens of microseconds apart), or after intakeHold, whichever
// is first; a stream that never lets the intake go idle is held once per busy spell, not
// once per job.

// intakeHold bounds how long the workers wait for the acknowledgements of a burst.
const intakeHold = 100 * time.Millisecond

// intakeLinger is how long the intake must have nothing pending to be idle.
const intakeLinger = 2 * time.Millisecond

// intake counts the envelopes between their reading and their acknowledgement, and holds
// the workers while there are some.
type intake struct {
	hold, linger time.Duration

	mu      sync.Mutex
	pending int
	// open is closed while the workers may go on: when nothing is pending, or the hold
	// has run out. held reports it is not closed.
	open  chan struct{}
	held  bool
	timer *time.Timer // ends the hold at its bound
	// idle, if set, ends the hold once nothing has been pending for linger.
	idle *time.Timer
}

func newIntake(hold, linger time.Duration) *intake {
	open := make(chan struct{})
	close(open)
	return &intake{hold: hold, linger: linger, open: open}
}

// arrived counts an envelope read from the socket. The first of a busy spell starts a hold.
func (in *intake) arrived() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.pending++
	if in.idle != nil {
		in.idle.Stop()
		in.idle = nil
	}
	if in.pending > 1 || in.held {
		return
	}
	open := make(chan struct{})
	in.open, in.held = open, true
	in.timer = time.AfterFunc(in.hold, func() { in.release(open) })
}

// settled counts n envelopes acknowledged, or dropped without an acknowledgement. When
// none is left pending, the hold ends after the linger unless another arrives first.
func (in *intake) settled(n int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.pending -= n
	if in.pending > 0 {
		return
	}
	in.pending = 0
	if in.held && in.idle == nil {
		open := in.open
		in.idle = time.AfterFunc(in.linger, func() { in.releaseIdle(open) })
	}
}

// releaseIdle is release for the linger's timer: not if an envelope arrived meanwhile (the
// timer may have fired just as it did).
func (in *intake) releaseIdle(open chan struct{}) {
	in.mu.Lock()
	idle := in.pending == 0
	in.mu.Unlock()
	if idle {
		in.release(open)
	}
}

// release ends the hold that open belongs to, if it is still on.
func (in *intake) release(open chan struct{}) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.open != open || !in.held {
		return
	}
	in.held = false
	in.timer.Stop()
	if in.idle != nil {
		in.idle.Stop()
		in.idle = nil
	}
	close(open)
}

// reset forgets what is pending and ends the hold: Run is over, and the workers drain.
func (in *intake) reset() {
	in.mu.Lock()
	in.pending = 0
	open := in.open
	in.mu.Unlock()
	in.release(open)
}

// wait returns when the workers may go on, or ctx ends.
func (in *intake) wait(ctx context.Context) {
	in.mu.Lock()
	open := in.open
	in.mu.Unlock()
	select {
	case <-open:
	case <-ctx.Done():
	}
}
