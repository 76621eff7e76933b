package web

import (
	"context"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// TestLiveAnswer streams an answer to a page over SSE: the text grows in "stream" events,
// a page that opens mid-stream gets the text so far, and the answer's Post ends the live
// text before the answer arrives as a message. Nothing of the live text is a message of
// the thread.
func TestLiveAnswer(t *testing.T) {
	a, srv, _ := newServer(t, Config{})
	ctx := context.Background()
	th := threadRef("t1")
	if _, err := a.Post(ctx, th, msg("Working")); err != nil {
		t.Fatal(err)
	}
	s := openStream(t, srv, "thread=t1", "")
	s.until("sync")
	st := bot.Stream{Thread: th, RunID: "r1", User: "web:you"}

	for _, piece := range []string{"The **answer** ", "grows "} {
		if err := a.StreamText(ctx, st, piece); err != nil {
			t.Fatal(err)
		}
	}
	first, second := s.nextNamed("stream"), s.nextNamed("stream")
	if h := first.data["html"].(string); !strings.Contains(h, "<strong>answer</strong>") || strings.Contains(h, "grows") {
		t.Errorf("first live html %q, want the first piece rendered", h)
	}
	if h := second.data["html"].(string); !strings.Contains(stripTags(h), "The answer grows") || !strings.Contains(h, `class="live"`) {
		t.Errorf("second live html %q, want the text so far, marked live", h)
	}

	late := openStream(t, srv, "thread=t1", "")
	evs := late.until("sync")
	if ev := evs[len(evs)-2]; ev.name != "stream" || !strings.Contains(stripTags(ev.data["html"].(string)), "The answer grows") {
		t.Errorf("a page opened mid-stream got %+v before sync, want the live text", ev)
	}

	ref, err := a.Post(ctx, th, bot.Message{Kind: bot.KindAnswer, Text: "The answer grows, and is done."})
	if err != nil {
		t.Fatal(err)
	}
	if ev := s.nextNamed("stream"); ev.data["html"] != "" {
		t.Errorf("the answer's post sent live html %q, want it ended", ev.data["html"])
	}
	if ev := s.nextNamed("message"); ev.data["id"] != ref.ID || ev.data["kind"] != "answer" {
		t.Errorf("after the live text ended came %+v, want the answer", ev.data)
	}
	a.mu.Lock()
	n, live := len(a.threads["t1"].entries), a.threads["t1"].live
	a.mu.Unlock()
	if n != 2 || live != "" {
		t.Errorf("thread holds %d messages and live text %q, want the card and the answer only", n, live)
	}

	// Narration: streamed, then reset.
	if err := a.StreamText(ctx, st, "Let me look. "); err != nil {
		t.Fatal(err)
	}
	s.nextNamed("stream")
	if err := a.StreamReset(ctx, st); err != nil {
		t.Fatal(err)
	}
	if ev := s.nextNamed("stream"); ev.data["html"] != "" {
		t.Errorf("a reset sent live html %q, want it ended", ev.data["html"])
	}
}
