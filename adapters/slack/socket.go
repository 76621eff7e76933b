package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/slack-go/slack/socketmode"

	"github.com/loopbot/loopbot/bot"
)

// Run receives events until ctx ends: over Socket Mode, or in HTTP mode by listening on
// ListenAddr. Each delivery is acknowledged first and then handed to h, so Slack always has
// its acknowledgement within its 3 seconds; deliveries acknowledged before ctx ended are
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

// runSocket is Run in Socket Mode. slack-go's client reconnects by itself when Slack asks
// (disconnect: refresh_requested, warning, link_disabled) or the socket dies; events already
// taken from it are acknowledged and queued independently of the connection, so none is
// lost or handled twice across a reconnect. An envelope that was never acknowledged is
// delivered again by Slack, with the same event_id.
func (a *Adapter) runSocket(ctx context.Context, h bot.Handler) error {
	self, err := a.whoami(ctx)
	if err != nil {
		return fmt.Errorf("slack socket mode: %w", err)
	}
	sm := socketmode.New(a.api)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- sm.RunContext(runCtx) }()

	s := a.newSession(ctx, h, self)
	defer s.drain()
	for {
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
		case ev := <-sm.Events:
			a.onSocketEvent(ctx, sm, s, ev)
		}
	}
}

// onSocketEvent acknowledges a Socket Mode envelope and queues what it carries.
func (a *Adapter) onSocketEvent(ctx context.Context, sm *socketmode.Client, s *session, ev socketmode.Event) {
	switch ev.Type {
	case socketmode.EventTypeEventsAPI, socketmode.EventTypeInteractive, socketmode.EventTypeSlashCommand:
	case socketmode.EventTypeErrorBadMessage:
		// slack-go could not parse the envelope (an event type it does not know, a payload
		// of the wrong shape). It is still acknowledged when it has an envelope ID: Slack
		// would otherwise deliver it again and again.
		bad, _ := ev.Data.(*socketmode.ErrorBadMessage)
		if bad == nil {
			return
		}
		var env struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(bad.Message, &env) == nil && env.EnvelopeID != "" {
			if err := sm.AckCtx(ctx, env.EnvelopeID, nil); err != nil {
				a.log.Warn("slack: ack unparsable envelope", "envelope", env.EnvelopeID, "err", logSafe(err))
			}
		}
		a.log.Warn("slack: unparsable socket mode envelope acknowledged and dropped", "envelope", env.EnvelopeID, "err", logSafe(bad.Cause))
		return
	case socketmode.EventTypeConnectionError, socketmode.EventTypeIncomingError, socketmode.EventTypeErrorWriteFailed:
		// A failed ack write needs nothing more: Slack delivers the envelope again and
		// the bot dedupes it.
		a.log.Warn("slack: socket mode", "event", ev.Type, "detail", logSafe(fmt.Errorf("%v", ev.Data)))
		return
	case socketmode.EventTypeInvalidAuth:
		a.log.Error("slack: socket mode: the app token was refused")
		return
	default:
		a.log.Debug("slack: socket mode", "event", ev.Type)
		return
	}
	req := ev.Request
	if req == nil || req.EnvelopeID == "" {
		a.log.Warn("slack: socket mode envelope without an envelope_id", "type", ev.Type)
		return
	}
	var (
		j      job
		ok     bool
		answer any
	)
	switch ev.Type {
	case socketmode.EventTypeEventsAPI:
		j, ok = s.fromEvent(req.Payload)
	case socketmode.EventTypeInteractive:
		j, ok = s.fromInteraction(req.Payload)
	case socketmode.EventTypeSlashCommand:
		var sc slashCommand
		if err := json.Unmarshal(req.Payload, &sc); err != nil {
			a.log.Warn("slack: undecodable slash command acknowledged and dropped", "err", logSafe(err))
			break
		}
		var reply string
		j, reply, ok = s.fromCommand(sc)
		if reply != "" {
			answer = ephemeral(reply)
		}
	}
	// Room for the job is reserved before the ack, so that an acknowledged job always has a
	// place and this loop never waits for the workers. When the thread's worker has too
	// many waiting, the envelope is not acknowledged: Slack delivers it again later.
	var q *queue
	if ok {
		q = s.queueFor(j)
		if !q.reserve() {
			a.log.Warn("slack: too many events waiting to be handled; envelope left unacknowledged for Slack to deliver again",
				"envelope", req.EnvelopeID, "event", j.ev.ID, "channel", j.ev.Thread.Channel)
			return
		}
	}
	// Acknowledge first; only then is the job ours to handle. If the ack cannot even be
	// queued (Run is ending), the job is left for Slack to deliver again.
	if err := sm.AckCtx(ctx, req.EnvelopeID, answer); err != nil {
		if q != nil {
			q.release()
		}
		if !errors.Is(err, context.Canceled) {
			a.log.Warn("slack: ack envelope", "envelope", req.EnvelopeID, "err", logSafe(err))
		}
		return
	}
	if q != nil {
		q.commit(j)
	}
}
