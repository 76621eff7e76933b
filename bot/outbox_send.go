package bot

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"time"
)

// A job is one outbox item handed to a worker, with what the loop knows of its channel that
// the worker needs: what the platform shows of it already.
type job struct {
	it  OutboxItem
	key string // the channel's pace key
	p   Platform
	// unsettled is the item as it reached the platform before, if the store could not
	// record that; shown is what this leader last showed in the message the item edits.
	unsettled *unsettled
	shown     *unsettled
	// repeat says another sender marked the item as being posted: the post may repeat.
	repeat bool
}

// outcome is what the loop does with an item once its job is done.
type outcome int

const (
	outcomeSent  outcome = iota // it reached the platform, or needs no call: settle it
	outcomeKept                 // not sent (a rate limit, a failure to retry, ctx ended): it stays
	outcomeDrop                 // it cannot be sent: delete it
	outcomeRetry                // the call failed: count the attempt and back off
	outcomeMark                 // not sent yet: write its Sending mark before the call
)

// result is what a worker did with a job.
type result struct {
	job
	outcome outcome
	msg     Message    // the item as rendered, before redaction
	ref     MessageRef // a message to record as the item's (a new post's, or an unsettled one's)
	shownIn MessageRef // the message that shows msg now, if the call made one show it
	called  bool       // a call was made; end is when it returned
	end     time.Time
	err     error
}

// call renders one item from the current records and posts or edits it. It runs on a
// worker and touches no state of the loop's: what it did goes back as the result.
func (d *dispatcher) call(ctx context.Context, j job) result {
	r := result{job: j, outcome: outcomeKept}
	d.render <- struct{}{}
	got, err := d.read(ctx, j.it)
	<-d.render
	r.msg = got.msg
	existing := got.existing
	if err != nil {
		if ctx.Err() == nil {
			r.outcome, r.err = outcomeDrop, err
		}
		return r
	}
	if u := j.unsettled; u != nil {
		if existing.ID == "" {
			// Edit what was posted, and save its reference this time.
			existing, r.ref = u.ref, u.ref
		}
		if sameMessage(&u.msg, r.msg) {
			r.outcome = outcomeSent
			return r
		}
	}
	if s := j.shown; s != nil && existing.ID != "" && s.ref == existing && sameMessage(&s.msg, r.msg) {
		// The message shows this already (a card's new state that looks the same): neither
		// redaction nor a call is needed.
		r.outcome = outcomeSent
		return r
	}
	out := d.redactor.message(r.msg)
	if existing.ID != "" {
		err = j.p.Update(ctx, existing, out)
		r.shownIn = existing
	} else {
		if j.repeat {
			d.log.Warn("outbox item marked by another sender, which stopped; posting it again", "item", j.it.Key, "by", j.it.Sending.Owner)
			out = withRepeatNote(out)
		}
		var ref MessageRef
		ref, err = j.p.Post(ctx, j.it.Thread, out)
		if ref.ID != "" {
			r.ref, r.shownIn = ref, ref
		}
	}
	// A call that failed may have reached the platform too, so it counts for pacing.
	r.called, r.end, r.err = true, time.Now(), err
	switch {
	case err == nil:
		r.outcome = outcomeSent
	case isErr[*RateLimitError](err):
	case isErr[*PermanentError](err):
		r.outcome = outcomeDrop
	case ctx.Err() != nil:
	default:
		r.outcome = outcomeRetry
	}
	return r
}

// isErr reports whether err is, or wraps, an error of type E. Its target is its own, so a
// call that succeeded allocates none.
func isErr[E error](err error) bool {
	var target E
	return errors.As(err, &target)
}

// readItem is what a worker reads from the store for an item it: its message, and the
// message it edits if it was posted before.
type readItem struct {
	it       OutboxItem
	msg      Message
	existing MessageRef
}

// read renders it from the records as they are now, in one read transaction. The closure
// the store runs shares only one readItem with call, so that the job and the result call
// keeps, a kilobyte a card, stay on its stack.
func (d *dispatcher) read(ctx context.Context, it OutboxItem) (readItem, error) {
	got := &readItem{it: it}
	err := d.store.View(ctx, func(tx Tx) error {
		msg, rec, err := renderRun(tx, got.it)
		if err != nil {
			return err
		}
		got.msg = msg
		got.existing, err = postedRef(tx, got.it, rec)
		return err
	})
	return *got, err
}

// finish takes a worker's result into the loop: the channel's pacing, its hold after a rate
// limit, and the store write the item needs, which the loop's next settle makes. It reports
// whether the outbox should be read again at once: the channel, free at once since no call
// was made, has more items. Otherwise a channel with more items is due when its pacing lets
// it go, and new items come with a wake.
func (d *dispatcher) finish(ctx context.Context, r result) (again bool) {
	ch := d.channel(r.key)
	ch.busy = false
	if r.called {
		ch.free = r.end.Add(d.editInterval)
	}
	d.outcome(ctx, ch, r)
	if ch.waiting > 1 || r.outcome == outcomeKept || r.outcome == outcomeRetry {
		d.due(ch.ready())
	}
	return !r.called && ch.waiting > 1
}

// outcome logs what happened to an item, holds its channel after a rate limit or a failure,
// and queues the store write it needs.
func (d *dispatcher) outcome(ctx context.Context, ch *channel, r result) {
	// Made only for a message: most outcomes are a sent item, which logs nothing.
	log := func() *slog.Logger {
		return d.log.With("item", r.it.Key, "platform", r.it.Thread.Platform, "channel", r.it.Thread.Channel)
	}
	var rl *RateLimitError
	switch r.outcome {
	case outcomeSent:
		if r.called {
			d.unhold(ctx, r.key, ch)
			d.remember(ch, r)
		}
	case outcomeDrop:
		if r.called {
			log().Error("platform refused the message for good; dropped", "err", r.err)
		} else {
			log().Error("render outbox item; dropped", "err", r.err)
		}
	case outcomeKept:
		if errors.As(r.err, &rl) {
			// Honour Retry-After for this channel only; the item is tried once more after it.
			log().Warn("platform rate limit", "retry_after", rl.RetryAfter)
			d.hold(ctx, r.key, ch, rl.RetryAfter, "rate limit")
			if r.it.Sending != nil {
				// The platform refused the post, so it did not go out: whoever sends it
				// next need not say it may repeat one.
				r.it.Sending, r.outcome = nil, outcomeMark
				d.settling = append(d.settling, r)
			}
		}
		return
	case outcomeRetry:
		r.it.Attempts++
		if r.it.Attempts >= maxAttempts {
			log().Error("platform call kept failing; dropped", "attempts", r.it.Attempts, "err", r.err)
			r.outcome = outcomeDrop
			break
		}
		backoff := min(retryBase<<(r.it.Attempts-1), retryCap)
		log().Warn("platform call failed; will retry", "attempts", r.it.Attempts, "backoff", backoff, "err", r.err)
		ch.notBefore = time.Now().Add(backoff)
	}
	d.settling = append(d.settling, r)
}

// remember notes what a call made a message show, for a later state of it that renders the
// same. Only messages that are edited later (cards) are looked up again.
func (d *dispatcher) remember(ch *channel, r result) {
	if r.shownIn.ID == "" || !edited(r.it.Kind) {
		return
	}
	if ch.shown == nil || len(ch.shown) >= maxShown {
		ch.shown = map[string]*unsettled{}
	}
	ch.shown[r.it.Key] = &unsettled{ref: r.shownIn, msg: r.msg}
}

// sameMessage reports whether a message shown or sent before is m. m is compared from a
// copy of its own: reflect.DeepEqual moves what it is given a pointer to onto the heap,
// which for the result call returns would be the whole result at every call.
func sameMessage(shown *Message, m Message) bool {
	return reflect.DeepEqual(shown, &m)
}

// edited reports whether items of kind edit the message their first one posted.
func edited(kind OutboxKind) bool {
	return kind == OutboxCard || kind == OutboxApprovalCard || kind == OutboxMemory || kind == OutboxAsk
}
