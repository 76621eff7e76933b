package bot

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/loopbot/loopbot/agent"
)

// Streaming shows a run's answer as the model writes it, on platforms that can. It is a
// preview, outside the outbox: best effort and never stored. The answer that counts is the
// one the run completes with, which goes through the outbox as every message does; a
// platform's Post of that answer finalises what it streamed (it replaces or completes the
// streamed message, so the answer is not shown twice). After a crash nothing of a stream
// is left in the process, and the outbox posts the answer as a new message.
//
// Text leaves the process only redacted. A secret may arrive split across deltas, so text
// goes out only up to the last whitespace, never inside a private key block that is not
// closed yet, nor from where a configured secret may be starting; what goes out is the
// redaction of all the text released so far, and if redacting more text would change what
// was already sent (a pattern that spans words), the stream stops there and the final
// answer shows the rest. Appends are coalesced to one per streamEvery per run (or what the
// platform asks, StreamPacer), by the bot's clock.

// Streamer is implemented by a Platform that can show an answer as it is written.
type Streamer interface {
	// Streams reports whether thread can show streamed text now.
	Streams(thread ThreadRef) bool
	// StreamText adds text to the stream of s, starting one when none is open.
	StreamText(ctx context.Context, s Stream, text string) error
	// StreamReset says the text streamed since the last reset is not the answer: the
	// model went on to call tools, or its reply failed and is asked for again.
	StreamReset(ctx context.Context, s Stream) error
	// StreamStop closes the stream of a run that stopped without an answer (it waits for
	// a person, failed, was cancelled or the bot is stopping). A completed run's stream is
	// finalised by the Post of its answer instead.
	StreamStop(ctx context.Context, s Stream) error
}

// PlanStreamer is implemented by a Streamer that also shows the run's plan in its stream
// (Slack's task cards).
type PlanStreamer interface {
	StreamPlan(ctx context.Context, s Stream, plan []PlanLine) error
}

// StreamPacer is implemented by a Streamer whose platform takes appends less often than
// streamEvery, by its rate limits.
type StreamPacer interface {
	StreamEvery() time.Duration
}

// Stream names the run a stream shows.
type Stream struct {
	Thread ThreadRef
	RunID  string
	// User is the platform ID of the person who started the run, whom the answer is for.
	User string
}

// streamEvery is the least time between two appends to one run's stream: a few a second
// reads as live text without costing a platform call for every token.
const streamEvery = 400 * time.Millisecond

// streamCallTimeout bounds one platform call of a stream; the model's stream waits for it.
const streamCallTimeout = 5 * time.Second

// streams opens the stream of a run on a platform that can show one.
type streams struct {
	platforms map[string]Platform
	redactor  *Redactor
	now       func() time.Time
	log       *slog.Logger
}

// open returns the stream of a run about to be worked on, or nil when its platform does
// not stream there.
func (ss *streams) open(rec *RunRecord) *textStream {
	if ss == nil {
		return nil
	}
	p, ok := ss.platforms[rec.Thread.Platform].(Streamer)
	if !ok || !p.Streams(rec.Thread) {
		return nil
	}
	ts := &textStream{ss: ss, p: p, s: Stream{Thread: rec.Thread, RunID: rec.ID, User: rec.Requester.ID}, every: streamEvery}
	if sp, ok := p.(StreamPacer); ok && sp.StreamEvery() > 0 {
		ts.every = sp.StreamEvery()
	}
	return ts
}

// textStream is one run's stream while a goroutine works on it. Only that goroutine uses
// it (the model calls Request.OnText before Complete returns), so it has no lock.
type textStream struct {
	ss *streams
	p  Streamer
	s  Stream

	// raw is the text since the last reset as the model wrote it; sent is the redacted
	// part of it that went out.
	raw  strings.Builder
	sent string
	// last is when text last went out; every is the least time between two appends.
	last  time.Time
	every time.Duration
	// off stops the text of this segment: a redaction changed what was sent, or the
	// platform refused.
	off bool
	// open is set once anything went to the platform.
	open bool
	// plan is the plan last shown, so that only a change goes out. It starts empty: a
	// run that resumes (after an approval, say) shows its plan in its new stream.
	plan []PlanLine
}

// text is the run's Hooks.Text.
func (ts *textStream) text(ctx context.Context, d agent.TextDelta) {
	if d.Reset {
		if d.Whole && !ts.off {
			// Narration the model finished: all of it may go, for a platform that keeps it.
			ts.flush(ctx, true)
		}
		if ts.open && ts.sent != "" {
			ts.call(ctx, "reset", func(ctx context.Context) error { return ts.p.StreamReset(ctx, ts.s) })
		}
		ts.raw.Reset()
		ts.sent, ts.off = "", false
		return
	}
	ts.raw.WriteString(d.Text)
	if ts.off || ts.ss.now().Sub(ts.last) < ts.every {
		return
	}
	ts.flush(ctx, false)
}

// flush sends what of the text is safe to send and was not sent yet; whole says the text
// is complete, so no word of it is cut short.
func (ts *textStream) flush(ctx context.Context, whole bool) {
	raw := ts.raw.String()
	if !whole {
		raw = raw[:ts.ss.redactor.releasable(raw)]
	}
	out := ts.ss.redactor.Redact(raw)
	if !strings.HasPrefix(out, ts.sent) {
		// Redacting more text changed what is already shown: nothing more of this reply
		// is streamed, and the final answer, redacted whole, replaces it.
		ts.ss.log.Info("streamed text stopped: a redaction reached text already shown", "run", ts.s.RunID)
		ts.off = true
		return
	}
	delta := out[len(ts.sent):]
	if delta == "" {
		return
	}
	if !ts.call(ctx, "append", func(ctx context.Context) error { return ts.p.StreamText(ctx, ts.s, delta) }) {
		ts.off = true
		return
	}
	ts.sent, ts.last, ts.open = out, ts.ss.now(), true
}

// checkpointed shows the plan of a state just saved, if it changed.
func (ts *textStream) checkpointed(ctx context.Context, st *agent.State) {
	ps, ok := ts.p.(PlanStreamer)
	plan := planLines(st.Plan)
	// An ended run's stream belongs to the Post of its answer, which may be under way.
	if !ok || st.Status.Terminal() || slices.Equal(plan, ts.plan) || len(plan) == 0 {
		return
	}
	for i := range plan {
		plan[i].Text = ts.ss.redactor.Redact(plan[i].Text)
	}
	if ts.call(ctx, "plan", func(ctx context.Context) error { return ps.StreamPlan(ctx, ts.s, plan) }) {
		ts.open = true
	}
	ts.plan = planLines(st.Plan)
}

// end closes the stream after the loop returned: a completed run's answer finalises it
// when the outbox posts it; any other stop closes it now.
func (ts *textStream) end(ctx context.Context, st *agent.State) {
	if ts == nil || !ts.open || st.Status == agent.StatusCompleted {
		return
	}
	ts.call(ctx, "stop", func(ctx context.Context) error { return ts.p.StreamStop(ctx, ts.s) })
}

// call makes one platform call of the stream, bounded in time, and reports whether it
// went through. A failure is logged and otherwise ignored: the stream is a preview.
func (ts *textStream) call(ctx context.Context, op string, fn func(context.Context) error) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), streamCallTimeout)
	defer cancel()
	if err := fn(ctx); err != nil {
		ts.ss.log.Warn("stream "+op+" failed", "run", ts.s.RunID, "thread", ts.s.Thread.Key(), "err", err)
		return false
	}
	return true
}

// planLines is a plan as messages show it.
func planLines(plan []agent.PlanItem) []PlanLine {
	out := make([]PlanLine, 0, len(plan))
	for _, it := range plan {
		out = append(out, PlanLine{Text: it.Step, Status: string(it.Status)})
	}
	return out
}

// releasable is how much of s, the start of a text still being written, may be redacted
// and sent: up to its last whitespace (the word after it may be a secret's start), but
// never from an opened private key block that is not closed yet, nor from where the rest
// of s could be the start of a configured secret.
func (r *Redactor) releasable(s string) int {
	cut := strings.LastIndexFunc(s, unicode.IsSpace)
	if cut < 0 {
		return 0
	}
	_, size := utf8.DecodeRuneInString(s[cut:])
	cut += size
	if begin := strings.LastIndex(s[:cut], "-----BEGIN"); begin >= 0 && !strings.Contains(s[begin:cut], "-----END") {
		cut = begin
	}
	for moved := true; moved; {
		moved = false
		for _, v := range r.values {
			for n := min(len(v)-1, cut); n > 0; n-- {
				if strings.HasSuffix(s[:cut], v[:n]) {
					cut -= n
					moved = true
					break
				}
			}
		}
	}
	return cut
}
