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
// the last of them is acknowledged (or dropped), or after intakeHold, whichever is first;
// a stream that never lets the intake go idle is held once per busy spell, not once per
// job.

// intakeHold bounds how long the workers wait for the acknowledgements of a burst.
const intakeHold = 100 * time.Millisecond

// intake counts the envelopes between their reading and their acknowledgement, and holds
// the workers while there are some.
type intake struct {
	hold time.Duration

	mu      sync.Mutex
	pending int
	// open is closed while the workers may go on: when nothing is pending, or the hold
	// has run out. held reports it is not closed.
	open  chan struct{}
	held  bool
	timer *time.Timer
}

func newIntake(hold time.Duration) *intake {
	open := make(chan struct{})
	close(open)
	return &intake{hold: hold, open: open}
}

// arrived counts an envelope read from the socket. The first of a busy spell starts a hold.
func (in *intake) arrived() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.pending++
	if in.pending > 1 || in.held {
		return
	}
	open := make(chan struct{})
	in.open, in.held = open, true
	in.timer = time.AfterFunc(in.hold, func() { in.release(open) })
}

// settled counts n envelopes acknowledged, or dropped without an acknowledgement. The
// last one pending ends the hold.
func (in *intake) settled(n int) {
	in.mu.Lock()
	in.pending -= n
	idle := in.pending <= 0
	if idle {
		in.pending = 0
	}
	open := in.open
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
