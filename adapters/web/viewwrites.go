package web

import (
	"context"
	"fmt"
	"slices"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/bot/text"
)

// The console's changes on a shared view (viewstore.go): each reads what changed first, so
// that it decides on the view as the store has it (a thread another replica opened is not
// opened again), then writes its rows, and the view changes when they are read back.

// postShared is Post on a shared view.
func (a *Adapter) postShared(ctx context.Context, th bot.ThreadRef, msg bot.Message) (bot.MessageRef, error) {
	if err := a.catchUp(ctx); err != nil {
		return bot.MessageRef{}, fmt.Errorf("post to web console: %w", err)
	}
	a.mu.Lock()
	a.msgs++
	id := fmt.Sprintf("m%s-%d", a.idTag, a.msgs)
	now := a.now()
	ws := a.threadWrites(th.Thread, "", "")
	ws = append(ws, a.entryWrites(th.Thread, record{Op: opEntry, Thread: th.Thread, At: now, Sent: now, ID: id, Kind: string(msg.Kind), Msg: &msg})...)
	a.mu.Unlock()
	if err := a.write(ctx, ws...); err != nil {
		return bot.MessageRef{}, fmt.Errorf("post to web console: %w", err)
	}
	return bot.MessageRef{Thread: th, ID: id}, nil
}

// updateShared is Update on a shared view.
func (a *Adapter) updateShared(ctx context.Context, ref bot.MessageRef, msg bot.Message) error {
	if err := a.catchUp(ctx); err != nil {
		return fmt.Errorf("update web console message: %w", err)
	}
	a.mu.Lock()
	now := a.now()
	sent := now
	if t, ok := a.threads[ref.Thread.Thread]; ok {
		if e := t.entry(ref.ID); e != nil {
			sent = e.sent
		}
	}
	ws := a.threadWrites(ref.Thread.Thread, "", "")
	ws = append(ws, a.entryWrites(ref.Thread.Thread, record{Op: opEntry, Thread: ref.Thread.Thread, At: now, Sent: sent, ID: ref.ID, Kind: string(msg.Kind), Msg: &msg})...)
	a.mu.Unlock()
	if err := a.write(ctx, ws...); err != nil {
		return fmt.Errorf("update web console message: %w", err)
	}
	return nil
}

// userRecord is the row of what a person typed in thread id.
func (a *Adapter) userRecord(id string, ev bot.Event) record {
	now := a.now()
	return record{Op: opEntry, Thread: id, At: now, Sent: now, ID: "u" + ev.ID, Kind: kindUser, User: ev.User.Name, Text: ev.Text, Event: ev.ID}
}

// newThreadShared opens a thread for a goal on a shared view, or finds the one the same
// goal opened before (a double submit), and returns its ID.
func (a *Adapter) newThreadShared(ctx context.Context, ev bot.Event, who identity) (string, error) {
	if err := a.catchUp(ctx); err != nil {
		return "", err
	}
	a.mu.Lock()
	for _, x := range a.threads {
		if x.mention == ev.ID && ownedBy(x.id, who.id()) {
			a.mu.Unlock()
			return x.id, nil
		}
	}
	id := newThreadID(who.id())
	ws := a.threadWrites(id, text.ClipRunes(firstLine(ev.Text), 80), ev.ID)
	ws = append(ws, a.entryWrites(id, a.userRecord(id, ev))...)
	a.mu.Unlock()
	return id, a.write(ctx, ws...)
}

// replyShared adds what a person wrote in thread id to a shared view, once however often
// it is submitted, and reports whether they may see the thread.
func (a *Adapter) replyShared(ctx context.Context, id string, ev bot.Event, who identity) (bool, error) {
	if err := a.catchUp(ctx); err != nil {
		return false, err
	}
	a.mu.Lock()
	t, ok := a.visible(who, id)
	var ws []viewWrite
	if ok && !slices.ContainsFunc(t.entries, func(e *entry) bool { return e.event == ev.ID }) {
		ws = a.entryWrites(id, a.userRecord(id, ev))
	}
	a.mu.Unlock()
	if len(ws) == 0 {
		return ok, nil
	}
	return ok, a.write(ctx, ws...)
}

// chosenShared is chosen on a shared view: the question card's row is written decided.
func (a *Adapter) chosenShared(ctx context.Context, threadID, actionID string, who bot.User) {
	if err := a.catchUp(ctx); err != nil {
		a.log.Warn("web console: could not mark a question as decided", "thread", threadID, "err", err)
		return
	}
	a.mu.Lock()
	var ws []viewWrite
	if t, ok := a.threads[threadID]; ok {
		if e, msg, ok := a.decidedQuestion(t, actionID, who); ok {
			ws = append(ws, viewWrite{thread: threadID, key: e.id, rec: record{Op: opEntry, Thread: threadID, At: a.now(), Sent: e.sent, ID: e.id, Kind: e.kind, Msg: &msg}})
		}
	}
	a.mu.Unlock()
	if len(ws) == 0 {
		return
	}
	if err := a.write(ctx, ws...); err != nil {
		a.log.Warn("web console: could not mark a question as decided", "thread", threadID, "err", err)
	}
}

// liveShared writes the live text of thread id on a shared view: what it has with text
// added, or none when reset. The replica that runs the run writes it, after the bot's
// redaction and at the bot's stream pace, and every console shows it.
func (a *Adapter) liveShared(ctx context.Context, id, added string, reset bool) error {
	a.mu.Lock()
	_, known := a.threads[id]
	a.mu.Unlock()
	if !known {
		// Another replica may have opened the thread a moment ago.
		if err := a.catchUp(ctx); err != nil {
			return err
		}
	}
	a.mu.Lock()
	t, ok := a.threads[id]
	var live string
	switch {
	case !ok:
		a.mu.Unlock()
		return nil
	case reset:
		if t.live == "" {
			a.mu.Unlock()
			return nil
		}
	default:
		if len(t.live)+len(added) > maxLiveText {
			a.mu.Unlock()
			return nil
		}
		live = t.live + added
	}
	a.mu.Unlock()
	return a.write(ctx, viewWrite{thread: id, key: liveKey, rec: record{Op: opLive, Thread: id, At: a.now(), Text: live}})
}
