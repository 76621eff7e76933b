package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"net"

	"github.com/loopbot/loopbot/bot"
)

// Run receives events until ctx ends: over Socket Mode, or in HTTP mode by listening on
// ListenAddr. When h accepts events (bot.Bot.Accept), the deliveries that arrived together
// are accepted in one call and acknowledged as soon as it returns, so an acknowledged event
// is stored before Slack forgets it; the few that need Slack first (a /loopbot root post, a
// reason modal) are acknowledged at once. Deliveries acknowledged before ctx ended are
// still handed to h (for up to DrainTimeout) before Run returns. Run returns nil when ctx
// ends, and an error when it cannot start or Slack refuses the tokens.
//
// Handle is given each delivery as Slack sent it: a redelivery has the same Event.ID, and
// the bot dedupes on it.
func (a *Adapter) Run(ctx context.Context, h bot.Handler) error {
	if a.cfg.Mode == ModeHTTP {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", a.cfg.ListenAddr)
		if err != nil {
			return fmt.Errorf("slack http mode: %w", err)
		}
		return a.Serve(ctx, ln, h)
	}
	return a.runSocket(ctx, h)
}

// runSocket is Run in Socket Mode, on the adapter's own connection (socketconn.go), which
// reconnects when Slack asks (disconnect: refresh_requested, warning, link_disabled) or the
// socket dies; events already taken from it are acknowledged and queued independently of
// the connection, so none is lost or handled twice across a reconnect. An envelope that was
// never acknowledged is delivered again by Slack, with the same event_id.
func (a *Adapter) runSocket(ctx context.Context, h bot.Handler) error {
	self, err := a.whoami(ctx)
	if err != nil {
		return fmt.Errorf("slack socket mode: %w", err)
	}
	sc := newSocketClient(a)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	s := a.newSession(ctx, h, self)
	defer s.drain()
	// The connection's reader decodes each envelope as it reads it (its payload is a slice
	// of the read buffer, which the next frame reuses) and adds it to the batch; it waits
	// when maxBatch wait, which leaves the envelopes that come meanwhile in the socket.
	pending := newBatch()
	pending.decoded = a.decoded
	done := make(chan error, 1)
	go func() {
		done <- sc.run(runCtx, func(e envelope) {
			s.intake.arrived()
			d, ok := a.decodeEnvelopeJob(s, e)
			if !ok {
				s.intake.settled(1)
				return
			}
			if _, ok := pending.add(runCtx, d); !ok && d.q != nil {
				d.q.release()
			}
		})
	}()

	// The acker accepts and acknowledges one batch at a time, in the order they came,
	// while the reader decodes what arrives meanwhile into the next: a burst is accepted
	// in as many transactions as there are disk syncs in its time, each batch the
	// envelopes that came during the sync before it.
	acked := make(chan struct{})
	go func() {
		defer close(acked)
		var spare []delivery
		var scratch ackScratch
		for {
			ds, ok := pending.take(runCtx, spare)
			if !ok {
				return
			}
			a.ackDeliveries(ctx, sc, s, ds, &scratch)
			spare = ds
		}
	}()
	defer func() {
		stop()
		<-acked
		// Decoded but never accepted nor acknowledged: Slack delivers them again.
		for _, d := range pending.close() {
			if d.q != nil {
				d.q.release()
			}
		}
	}()
	select {
	case <-ctx.Done():
		stop()
		<-done
		return nil
	case err := <-done:
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("slack socket mode: %w", err)
	}
}

// maxBatch bounds the envelopes accepted together, so that one transaction stays short.
const maxBatch = 256

// delivery is one envelope between its decoding and its acknowledgement.
type delivery struct {
	envelope string
	answer   any
	job      *job   // nil when there is nothing to handle
	q        *queue // the job's worker, with room reserved; nil when there is no job
	durable  bool   // the job is accepted before the ack
	dropped  bool   // not to be acknowledged: Slack delivers it again
}

// ackDeliveries acknowledges the envelopes decoded together and queues what they carry.
// The jobs that reach the bot as they are are accepted first, all in one call (one
// transaction), and acknowledged only once that has returned: an acknowledged event is
// never lost, even to a kill -9.
func (a *Adapter) ackDeliveries(ctx context.Context, sc *socketClient, s *session, ds []delivery, scratch *ackScratch) {
	accept, accepted := scratch.accept[:0], scratch.accepted[:0]
	defer func() {
		clear(accept)
		scratch.accept, scratch.accepted = accept[:0], accepted[:0]
	}()
	for i, d := range ds {
		if d.durable {
			accept = append(accept, d.job.ev)
			accepted = append(accepted, i)
		}
	}
	if len(accept) > 0 {
		added, err := s.acc.Accept(ctx, accept)
		for i, k := range accepted {
			d := &ds[k]
			switch {
			case err != nil:
				// Not acknowledged: Slack delivers them again.
				d.dropped = true
				d.q.release()
				d.q = nil
			case !added[i]:
				// A redelivery of an event waiting to be handled: acknowledged, and
				// handled once, with its first delivery (or at the next start).
				d.q.release()
				d.q = nil
			}
		}
		if err != nil {
			a.log.Error("slack: accept events; envelopes left unacknowledged for Slack to deliver again", "count", len(accept), "err", logSafe(err))
		}
	}
	// The acks are written together, and only then are the jobs handed on.
	acks := scratch.acks[:0]
	defer func() {
		clear(acks)
		scratch.acks = acks[:0]
	}()
	for _, d := range ds {
		if !d.dropped {
			acks = append(acks, ackFrame{d.envelope, d.answer})
		}
	}
	var err error
	if len(acks) > 0 {
		if err = sc.ack(acks); err != nil {
			a.log.Warn("slack: ack envelopes", "count", len(acks), "err", logSafe(err))
		}
	}
	for i := range ds {
		d := &ds[i]
		if d.dropped {
			continue
		}
		switch {
		case d.q == nil:
		case err != nil && !d.durable:
			// The ack was not written (the connection is gone): the job is left for
			// Slack to deliver again.
			d.q.release()
		default:
			// An accepted job is handled even when its ack was not sent: it is stored,
			// and a redelivery is a duplicate.
			d.q.commit(d.job)
		}
	}
	s.intake.settled(len(ds))
}

// ackScratch is what ackDeliveries reuses from one batch to the next, so that a burst's
// batches allocate nothing of their own once it has grown. The handler's Accept does not
// keep the events it is given.
type ackScratch struct {
	accept   []bot.Event
	accepted []int
	acks     []ackFrame
}

// decodeEnvelopeJob decodes a Socket Mode envelope's payload into the delivery to
// acknowledge, with room reserved for its job. What carries nothing to handle (an envelope
// of a type loopbot does not know, a payload that does not decode) is still acknowledged,
// or Slack would deliver it again and again. It reports false for what is not to be
// acknowledged.
func (a *Adapter) decodeEnvelopeJob(s *session, e envelope) (delivery, bool) {
	if e.EnvelopeID == "" {
		a.log.Warn("slack: socket mode envelope without an envelope_id", "type", e.Type)
		return delivery{}, false
	}
	d := delivery{envelope: e.EnvelopeID}
	var j job
	var ok bool
	switch e.Type {
	case "events_api":
		if e.decoded {
			j, ok = s.fromCallback(e.Payload, e.callback, e.event)
		} else {
			j, ok = s.fromEvent(e.Payload)
		}
	case "interactive":
		j, ok = s.fromInteraction(e.Payload)
	case "slash_commands":
		var sc slashCommand
		if err := json.Unmarshal(e.Payload, &sc); err != nil {
			a.log.Warn("slack: undecodable slash command acknowledged and dropped", "err", logSafe(err))
			break
		}
		var reply string
		j, reply, ok = s.fromCommand(sc)
		if reply != "" {
			d.answer = ephemeral(reply)
		}
	default:
		a.log.Warn("slack: socket mode envelope of an unknown type acknowledged and dropped", "type", e.Type, "envelope", e.EnvelopeID)
	}
	if !ok {
		return d, true
	}
	// Room for the job is reserved before the ack, so that an acknowledged job always has a
	// place and this loop never waits for the workers. When the thread's worker has too
	// many waiting, the envelope is not acknowledged: Slack delivers it again later.
	q := s.queueFor(j)
	if !q.reserve() {
		a.log.Warn("slack: too many events waiting to be handled; envelope left unacknowledged for Slack to deliver again",
			"envelope", e.EnvelopeID, "event", j.ev.ID, "channel", j.ev.Thread.Channel)
		return delivery{}, false
	}
	held := j // on the heap, where the queue keeps it; j stays on the stack
	d.job, d.q, d.durable = &held, q, s.durable(j)
	return d, true
}
