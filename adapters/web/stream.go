package web

import (
	"context"
	"fmt"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// The console shows a run's answer as the model writes it (bot.Streamer). The text so far
// goes to the pages showing the thread as a "stream" event, rendered like the answer it
// will become; it is not a message of the thread and is never kept in the history. The
// answer's Post ends it: the pages drop the live text as the answer arrives in its place. A
// reset or a stop (the text was narration, or the run waits for a person) ends it too.
//
//	event: stream  (no id)  data: {"thread","html"}; "" html ends the live text

var _ bot.Streamer = (*Adapter)(nil)

type streamData struct {
	Thread string `json:"thread"`
	HTML   string `json:"html"`
}

// maxLiveText bounds the live text of one thread: past it the pages wait for the answer.
const maxLiveText = 64 << 10

// Streams is true for the console's own threads.
func (a *Adapter) Streams(th bot.ThreadRef) bool { return checkThread(th) == nil }

// StreamText adds text to the thread's live answer and pushes it to the pages showing it.
func (a *Adapter) StreamText(ctx context.Context, s bot.Stream, text string) error {
	if err := checkThread(s.Thread); err != nil {
		return fmt.Errorf("stream to web console: %w", err)
	}
	if a.vs != nil {
		return a.liveShared(ctx, s.Thread.Thread, text, false)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.threads[s.Thread.Thread]
	if !ok || len(t.live)+len(text) > maxLiveText {
		return nil
	}
	t.live += text
	a.publishLive(t)
	return nil
}

// StreamReset drops the live text: it was not the answer.
func (a *Adapter) StreamReset(ctx context.Context, s bot.Stream) error {
	if a.vs != nil {
		return a.liveShared(ctx, s.Thread.Thread, "", true)
	}
	a.endLive(s.Thread.Thread)
	return nil
}

// StreamStop drops the live text of a run that stopped without an answer.
func (a *Adapter) StreamStop(ctx context.Context, s bot.Stream) error {
	if a.vs != nil {
		return a.liveShared(ctx, s.Thread.Thread, "", true)
	}
	a.endLive(s.Thread.Thread)
	return nil
}

// endLive drops the live text of thread id and tells the pages.
func (a *Adapter) endLive(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t, ok := a.threads[id]; ok && t.live != "" {
		t.live = ""
		a.publishLive(t)
	}
}

// liveEvent is the event that shows t's live text, or ends it when there is none.
func (a *Adapter) liveEvent(t *thread) event {
	html := ""
	if t.live != "" {
		html = renderLive(a.now(), t.live)
	}
	return newEvent("", "stream", streamData{Thread: t.id, HTML: html})
}

// publishLive pushes t's live text to the pages showing t; a.mu must be held.
func (a *Adapter) publishLive(t *thread) {
	a.publish(a.liveEvent(t), func(s *subscriber) bool { return s.thread == t.id })
}

// renderLive renders text still being written as the answer it will become, marked as
// being written.
func renderLive(now time.Time, text string) string {
	return renderRow("", now, `<div class="live" aria-live="polite" aria-busy="true">`+"\n"+
		renderMessage(bot.Message{Kind: bot.KindAnswer, Text: text})+"</div>\n")
}
