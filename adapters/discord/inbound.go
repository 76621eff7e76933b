package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/bot/text"
)

// Discord's error codes the adapter acts on.
const (
	codeThreadExists = 160004 // a thread was already created for this message
)

// What the acting user is told when the adapter, not the bot, could not do its part.
const (
	noticeHandleFailed = "loopbot could not take this in. Please try again in a moment."
	noticeNoThread     = "loopbot could not open a thread here. It needs the Create Public Threads and Send Messages in Threads permissions."
	noticeDone         = "Done."
)

// track runs fn on its own goroutine unless the adapter is shutting down; Run waits for it.
func (a *Adapter) track(fn func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.work.Add(1)
	go func() {
		defer a.work.Done()
		fn()
	}()
}

// shutdown stops new event work and waits for the work under way.
func (a *Adapter) shutdown() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.work.Wait()
}

// eventContext is the context of one event's work: it survives the end of Run's context,
// so work that Discord has been told about is finished, but not eventTimeout.
func eventContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), eventTimeout)
}

// deferredResponse is the acknowledgement of an interaction: "thinking…" for a command
// (ephemeral for status and cancel), nothing visible for a button.
func deferredResponse(in *interaction) *discordgo.InteractionResponse {
	if in.ping {
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponsePong}
	}
	if in.ev.Kind == bot.EventAction {
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}
	}
	r := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource}
	if in.private {
		r.Data = &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral}
	}
	return r
}

// onInteraction handles an INTERACTION_CREATE from the gateway: acknowledge first, then
// the rest.
func (a *Adapter) onInteraction(ctx context.Context, h bot.Handler, raw []byte) {
	in, err := decodeInteraction(raw)
	switch {
	case errors.Is(err, errIgnored):
		return
	case err != nil:
		a.log.Warn("discord: bad interaction", "err", err)
		return
	case in.ping:
		return
	}
	_, err = call(ctx, "acknowledge interaction", func(opts ...discordgo.RequestOption) (struct{}, error) {
		return struct{}{}, a.s.InteractionRespond(in.it, deferredResponse(in), opts...)
	})
	switch {
	case apiCode(err) == discordgo.ErrCodeInteractionHasAlreadyBeenAcknowledged:
		// A redelivery (after a gateway resume) of an interaction this process or an earlier
		// one answered: the first delivery did the work.
		a.log.Info("discord: interaction delivered again; already acknowledged", "interaction", in.ev.ID)
		return
	case err != nil:
		// Past its three seconds the interaction is lost; Discord tells the user it failed.
		a.log.Error("discord: acknowledge interaction", "interaction", in.ev.ID, "err", err)
		return
	}
	a.afterAck(ctx, h, in)
}

// afterAck does an interaction's work once Discord has the deferred response: it opens the
// run's thread if it needs one, hands the event to the bot, and answers the user.
func (a *Adapter) afterAck(ctx context.Context, h bot.Handler, in *interaction) {
	ev := in.ev
	if ev.Thread.Thread == "" {
		if ev.Text == "" {
			// Nothing to start: the bot says so, and no empty thread is left behind.
			ev.Thread.Thread = ev.Thread.Channel
		} else {
			var id string
			err := retryLimited(ctx, func() error {
				var err error
				id, err = a.threadFromResponse(ctx, in)
				return err
			})
			if err != nil {
				a.log.Error("discord: open run thread", "interaction", ev.ID, "err", err)
				a.answer(ctx, in, noticeNoThread)
				return
			}
			ev.Thread.Thread = id
		}
	}
	if wantsHistory(in, a.currentBotID()) {
		// What was said in the channel (or the thread) before the command is the new run's
		// context; the interaction's ID is when it was used.
		a.withHistory(ctx, &ev, in.it.ChannelID, in.it.ID)
	}
	a.mu.Lock()
	a.tokens[ev.Thread.Key()+"/"+ev.User.ID] = recentInteraction{it: in.it, at: a.now()}
	a.mu.Unlock()
	res, err := h.Handle(ctx, ev)
	switch {
	case err != nil:
		a.log.Error("discord: handle interaction", "interaction", ev.ID, "err", err)
		a.answer(ctx, in, noticeHandleFailed)
	case res.Duplicate:
	case res.Notice != "":
		a.answer(ctx, in, res.Notice)
	case in.private:
		a.answer(ctx, in, noticeDone)
	}
}

// wantsHistory reports whether a command may start a thread's first run and so needs what
// was said before it: /loopbot with a goal in a server's channel, or in a thread the bot did
// not start (in the bot's own threads, the runs already there are the context).
func wantsHistory(in *interaction, botID string) bool {
	return in.ev.Command == bot.CommandStart && in.ev.Text != "" && in.it.GuildID != "" && !in.private &&
		(in.threadOwner == "" || in.threadOwner != botID)
}

// answer tells the acting user note alone: in the ephemeral deferred response for status
// and cancel, as an ephemeral follow-up otherwise.
func (a *Adapter) answer(ctx context.Context, in *interaction, note string) {
	var err error
	if in.private {
		content := text.ClipBytes(escape(note), maxContent)
		_, err = call(ctx, "answer command", func(opts ...discordgo.RequestOption) (*discordgo.Message, error) {
			return a.s.InteractionResponseEdit(in.it, &discordgo.WebhookEdit{Content: &content, AllowedMentions: noMentions()}, opts...)
		})
	} else {
		err = a.followup(ctx, in.it, note)
	}
	if err != nil {
		a.log.Error("discord: answer interaction", "interaction", in.ev.ID, "err", err)
	}
}

// threadFromResponse turns the deferred response of a start command into the goal's
// message and opens the run's thread from it.
func (a *Adapter) threadFromResponse(ctx context.Context, in *interaction) (string, error) {
	content := text.ClipBytes(fmt.Sprintf("**%s** asked: %s", escape(in.ev.User.Name), escape(in.ev.Text)), maxContent)
	msg, err := call(ctx, "show goal", func(opts ...discordgo.RequestOption) (*discordgo.Message, error) {
		return a.s.InteractionResponseEdit(in.it, &discordgo.WebhookEdit{Content: &content, AllowedMentions: noMentions()}, opts...)
	})
	if err != nil {
		return "", err
	}
	return a.startThread(ctx, in.ev.Thread.Channel, msg.ID, in.ev.Text)
}

// startThread opens a public thread from a message. Discord gives a thread started from a
// message the message's ID, so a redelivered event finds its thread again.
func (a *Adapter) startThread(ctx context.Context, channelID, messageID, goal string) (string, error) {
	ch, err := call(ctx, "start thread", func(opts ...discordgo.RequestOption) (*discordgo.Channel, error) {
		return a.s.MessageThreadStartComplex(channelID, messageID, &discordgo.ThreadStart{
			Name:                threadName(goal),
			AutoArchiveDuration: 10080, // a week: runs wait for approvals and replies
		}, opts...)
	})
	if apiCode(err) == codeThreadExists {
		return messageID, nil
	}
	if err != nil {
		return "", err
	}
	a.remember(ch.ID, channelInfo{Type: ch.Type, ParentID: channelID, OwnerID: ch.OwnerID})
	return ch.ID, nil
}

// maxLimitedTries bounds the attempts of retryLimited.
const maxLimitedTries = 3

// retryLimited runs fn, and runs it again after a rate limit's wait if the wait ends before
// ctx does, at most maxLimitedTries times. It is for the steps that open a run's thread:
// they happen after the event was acknowledged, outside the bot's outbox, so nothing else
// would retry them and the goal would be lost to a 429 (opening threads is limited tightly).
// fn must be safe to repeat.
func retryLimited(ctx context.Context, fn func() error) error {
	for try := 1; ; try++ {
		err := fn()
		var rl *bot.RateLimitError
		if err == nil || try == maxLimitedTries || !errors.As(err, &rl) {
			return err
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= rl.RetryAfter {
			return err
		}
		t := time.NewTimer(rl.RetryAfter)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// remember caches what a channel is.
func (a *Adapter) remember(id string, ch channelInfo) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.channels) >= maxCachedChannels {
		clear(a.channels)
	}
	a.channels[id] = ch
}

// channel says what a channel is, from the cache or the API.
func (a *Adapter) channel(ctx context.Context, id string) (channelInfo, error) {
	a.mu.Lock()
	ch, ok := a.channels[id]
	a.mu.Unlock()
	if ok {
		return ch, nil
	}
	c, err := call(ctx, "look up channel", func(opts ...discordgo.RequestOption) (*discordgo.Channel, error) {
		return a.s.Channel(id, opts...)
	})
	if err != nil {
		return channelInfo{}, err
	}
	ch = channelInfo{Type: c.Type, ParentID: c.ParentID, OwnerID: c.OwnerID}
	a.remember(id, ch)
	return ch, nil
}

// onMessage handles a MESSAGE_CREATE: a DM continues the DM's conversation, a message in
// a run's thread is a reply, a mention elsewhere starts a run in a new thread.
func (a *Adapter) onMessage(ctx context.Context, h bot.Handler, raw []byte) {
	botID := a.currentBotID()
	m, err := decodeMessage(raw, botID)
	switch {
	case errors.Is(err, errIgnored):
		return
	case err != nil:
		a.log.Warn("discord: bad message", "err", err)
		return
	}
	ev := m.ev
	switch {
	case m.dm:
		ev.Kind, ev.Thread.Thread, ev.Direct = bot.EventReply, ev.Thread.Channel, true
	default:
		ch, err := a.channel(ctx, ev.Thread.Channel)
		if err != nil {
			a.log.Error("discord: look up channel", "channel", ev.Thread.Channel, "err", err)
			return
		}
		switch {
		case ch.isThread() && botID != "" && ch.OwnerID == botID:
			ev.Kind = bot.EventReply
			ev.Thread.Channel, ev.Thread.Thread = ch.ParentID, ev.Thread.Channel
		case ch.isThread() && m.mentioned:
			ev.Kind = bot.EventMention
			ev.Thread.Channel, ev.Thread.Thread = ch.ParentID, ev.Thread.Channel
			a.withHistory(ctx, &ev, ev.Thread.Thread, ev.ID)
		case m.mentioned:
			ev.Kind = bot.EventMention
			var id string
			err := retryLimited(ctx, func() error {
				var err error
				id, err = a.startThread(ctx, ev.Thread.Channel, ev.ID, ev.Text)
				return err
			})
			if err != nil {
				a.log.Error("discord: open run thread", "message", ev.ID, "err", err)
				return
			}
			ev.Thread.Thread = id
			// The run's thread is new: what the channel held before the mention is its
			// context.
			a.withHistory(ctx, &ev, ev.Thread.Channel, ev.ID)
		default:
			return
		}
	}
	res, err := h.Handle(ctx, ev)
	if err != nil {
		// Nothing delivers a message again: the person must hear that it was not taken.
		a.log.Error("discord: handle message", "message", ev.ID, "err", err)
		res.Notice = noticeHandleFailed
	}
	if res.Notice != "" && !res.Duplicate {
		if err := a.mention(ctx, ev.Thread, ev.User.ID, res.Notice); err != nil {
			a.log.Error("discord: notice", "message", ev.ID, "err", err)
		}
	}
}

func (a *Adapter) currentBotID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botID
}

// onGatewayEvent routes a gateway dispatch. It runs on discordgo's read loop, so it only
// records READY and starts the work of everything else on its own goroutine.
func (a *Adapter) onGatewayEvent(ctx context.Context, h bot.Handler, e *discordgo.Event) {
	switch e.Type {
	case "READY":
		var r struct {
			User struct {
				ID string `json:"id"`
			} `json:"user"`
		}
		if err := json.Unmarshal(e.RawData, &r); err == nil && r.User.ID != "" {
			a.mu.Lock()
			a.botID = r.User.ID
			a.mu.Unlock()
		}
	case "INTERACTION_CREATE", "MESSAGE_CREATE":
		raw, kind := e.RawData, e.Type
		a.track(func() {
			ectx, cancel := eventContext(ctx)
			defer cancel()
			if kind == "INTERACTION_CREATE" {
				a.onInteraction(ectx, h, raw)
			} else {
				a.onMessage(ectx, h, raw)
			}
		})
	case "CHANNEL_DELETE", "THREAD_DELETE":
		var c struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(e.RawData, &c) == nil {
			a.mu.Lock()
			delete(a.channels, c.ID)
			a.mu.Unlock()
		}
	}
}
