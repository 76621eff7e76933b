package bot_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// streamThread is a thread of the streaming platform.
var streamThread = bot.ThreadRef{Platform: "stream", Channel: "C1", Thread: "T1"}

// streamRecorder is a recording platform that can stream: it notes every stream call.
type streamRecorder struct {
	*recorder
	smu   sync.Mutex
	calls []string // "text:...", "reset", "stop", "plan:n"
}

var _ bot.Streamer = (*streamRecorder)(nil)

func (s *streamRecorder) note(c string) {
	s.smu.Lock()
	defer s.smu.Unlock()
	s.calls = append(s.calls, c)
}

func (s *streamRecorder) log() []string {
	s.smu.Lock()
	defer s.smu.Unlock()
	return append([]string(nil), s.calls...)
}

// texts is every text appended, in order.
func (s *streamRecorder) texts() []string {
	var out []string
	for _, c := range s.log() {
		if t, ok := strings.CutPrefix(c, "text:"); ok {
			out = append(out, t)
		}
	}
	return out
}

func (s *streamRecorder) Streams(bot.ThreadRef) bool { return true }
func (s *streamRecorder) StreamText(_ context.Context, _ bot.Stream, text string) error {
	s.note("text:" + text)
	return nil
}
func (s *streamRecorder) StreamReset(context.Context, bot.Stream) error { s.note("reset"); return nil }
func (s *streamRecorder) StreamStop(context.Context, bot.Stream) error  { s.note("stop"); return nil }

// streamReply is one reply of streamingModel: its text in pieces, a piece every gap on the
// bot's clock, and the calls it makes.
type streamReply struct {
	pieces []string
	gap    time.Duration
	calls  []agent.ToolCall
	// hold makes the reply wait, after its pieces, until its context ends: the process
	// stops while the model writes.
	hold bool
}

// streamingModel is a Model that streams scripted replies through Request.OnText, moving
// the bot's clock between the pieces.
type streamingModel struct {
	clock   *clock
	mu      sync.Mutex
	replies []streamReply
}

func (m *streamingModel) Complete(ctx context.Context, req agent.Request) (agent.Reply, error) {
	m.mu.Lock()
	r := m.replies[0]
	if len(m.replies) > 1 {
		m.replies = m.replies[1:]
	}
	m.mu.Unlock()
	var b strings.Builder
	for _, p := range r.pieces {
		m.clock.Advance(r.gap)
		if req.OnText != nil {
			req.OnText(agent.TextDelta{Text: p})
		}
		b.WriteString(p)
	}
	if r.hold {
		<-ctx.Done()
		return agent.Reply{}, context.Cause(ctx)
	}
	return agent.Reply{Message: agent.Message{Role: agent.RoleAssistant, Content: b.String(), ToolCalls: r.calls}, Usage: agent.Usage{Calls: 1}, FinishReason: "stop"}, nil
}

// newStreamHarness is a harness whose bot also has a streaming platform, with a model
// that streams replies.
func newStreamHarness(t *testing.T, cfg bot.Config, replies []streamReply, tools ...agent.Tool) (*harness, *streamRecorder) {
	t.Helper()
	m := &streamingModel{replies: replies}
	h := newHarnessWith(t, cfg, m, tools...)
	m.clock = h.clock
	sp := &streamRecorder{recorder: &recorder{name: "stream"}}
	h.others = []bot.Platform{sp}
	h.restart()
	return h, sp
}

// TestStreamedAnswer streams an answer that holds a configured secret split across two
// pieces: what goes out is redacted and never holds a part of the secret, and the answer is
// posted once, through the outbox.
func TestStreamedAnswer(t *testing.T) {
	bubble(t, func(t *testing.T) {
		const secret = "sk-live-0123456789abcdef"
		pieces := []string{"Hello ", "wor", "ld, the key ", "is sk-live-", "0123456789abcdef", " and that ", "is all."}
		h, sp := newStreamHarness(t, bot.Config{Redact: []string{secret}},
			[]streamReply{{pieces: pieces, gap: time.Second}})
		h.event(bot.Event{Kind: bot.EventMention, User: ann, Text: "say hello", Thread: streamThread})
		h.settle()
		texts := sp.texts()
		streamed := strings.Join(texts, "")
		if len(texts) < 3 || !strings.HasPrefix(streamed, "Hello world, the key is [redacted] and ") {
			t.Errorf("streamed %q in %d appends, want the redacted answer word by word", streamed, len(texts))
		}
		for _, s := range texts {
			if strings.Contains(s, "sk-live") || strings.Contains(s, "0123456789") {
				t.Errorf("an append carries part of the secret: %q", s)
			}
		}
		answers := sp.sent(bot.KindAnswer)
		if len(answers) != 1 || answers[0].msg.Text != "Hello world, the key is [redacted] and that is all." {
			t.Errorf("answers posted: %+v, want the redacted answer once", answers)
		}
		if log := sp.log(); len(log) == 0 || log[len(log)-1] == "stop" || strings.Contains(strings.Join(log, ","), "reset") {
			t.Errorf("stream calls %q: a completed run's stream is finalised by its answer, not stopped or reset", log)
		}
	})
}

// TestStreamThrottled sends a piece every 50ms of the bot's clock: the appends are
// coalesced to one per StreamEvery.
func TestStreamThrottled(t *testing.T) {
	bubble(t, func(t *testing.T) {
		pieces := make([]string, 40)
		for i := range pieces {
			pieces[i] = "word "
		}
		gap := 50 * time.Millisecond
		h, sp := newStreamHarness(t, bot.Config{}, []streamReply{{pieces: pieces, gap: gap}})
		h.event(bot.Event{Kind: bot.EventMention, User: ann, Text: "talk", Thread: streamThread})
		h.settle()
		n := len(sp.texts())
		most := int(time.Duration(len(pieces))*gap/bot.StreamEvery) + 1
		if n < 2 || n > most {
			t.Errorf("%d appends for %d pieces over %s, want 2 to %d", n, len(pieces), time.Duration(len(pieces))*gap, most)
		}
	})
}

// TestStreamNarrationReset: a reply that narrates and then calls a tool is reset, and a run
// that stops to wait for an approval closes its stream.
func TestStreamNarrationReset(t *testing.T) {
	bubble(t, func(t *testing.T) {
		danger := &tool{name: "deploy", risk: agent.RiskConfirm}
		h, sp := newStreamHarness(t, bot.Config{}, []streamReply{
			{pieces: []string{"I will ", "deploy ", "now."}, gap: time.Second, calls: []agent.ToolCall{{ID: "c1", Name: "deploy", Arguments: `{}`}}},
		}, danger)
		h.event(bot.Event{Kind: bot.EventMention, User: ann, Text: "deploy it", Thread: streamThread})
		h.settle()
		got := strings.Join(sp.log(), "|")
		if got != "text:I will |text:deploy |text:now.|reset|stop" {
			t.Errorf("stream calls %q, want the whole narration, a reset and a stop", got)
		}
		if n := len(sp.sent(bot.KindAnswer)); n != 0 {
			t.Errorf("%d answers posted for a run waiting for approval", n)
		}
	})
}

// TestReleasable checks where text still being written may be cut for streaming.
func TestReleasable(t *testing.T) {
	r := bot.NewRedactor([]string{"correct horse battery staple"})
	tests := []struct{ in, want string }{
		{"Hello wor", "Hello "},
		{"nospace", ""},
		{"Done.\n", "Done.\n"},
		{"key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow ", "key:\n"},
		{"-----BEGIN RSA PRIVATE KEY-----\nMII\n-----END RSA PRIVATE KEY-----\nok ", "-----BEGIN RSA PRIVATE KEY-----\nMII\n-----END RSA PRIVATE KEY-----\nok "},
		{"the phrase is correct horse bat", "the phrase is "},
		{"a correct answer ", "a correct answer "},
	}
	for _, tt := range tests {
		if got := tt.in[:bot.Releasable(r, tt.in)]; got != tt.want {
			t.Errorf("releasable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestStreamStopsWhenRedactionReachesBack: a configured secret hidden by an invisible
// character is only found once its last word arrives, when its first word was out already;
// the stream stops there rather than send text that no longer lines up with what was shown,
// and the answer, redacted whole, is posted once.
func TestStreamStopsWhenRedactionReachesBack(t *testing.T) {
	bubble(t, func(t *testing.T) {
		pieces := []string{"The phrase ", "is hun\u200bter2 ", "hunter3 and ", "more words ", "follow."}
		h, sp := newStreamHarness(t, bot.Config{Redact: []string{"hunter2 hunter3"}},
			[]streamReply{{pieces: pieces, gap: time.Second}})
		h.event(bot.Event{Kind: bot.EventMention, User: ann, Text: "what phrase", Thread: streamThread})
		h.settle()
		streamed := strings.Join(sp.texts(), "")
		if strings.Contains(streamed, "hunter3") || strings.Contains(streamed, "more") || strings.Contains(streamed, "redacted") {
			t.Errorf("streamed %q: nothing may follow once redaction changed what was shown", streamed)
		}
		answers := sp.sent(bot.KindAnswer)
		if len(answers) != 1 || strings.Contains(answers[0].msg.Text, "hunter3") {
			t.Errorf("answers %+v, want one, redacted", answers)
		}
	})
}

// TestStreamAnswerAfterRestart: the process stops while the model is writing the answer.
// The stream is closed, the run resumes in the next process, and its answer goes through
// the outbox exactly once.
func TestStreamAnswerAfterRestart(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h, sp := newStreamHarness(t, bot.Config{}, []streamReply{
			{pieces: []string{"Partial ", "answer "}, gap: time.Second, hold: true},
			{pieces: []string{"The whole ", "answer."}, gap: time.Second},
		})
		res := h.event(bot.Event{Kind: bot.EventMention, User: ann, Text: "answer me", Thread: streamThread})
		synctest.Wait()
		if got := strings.Join(sp.texts(), ""); got != "Partial answer " {
			t.Fatalf("streamed %q before the stop, want the partial answer", got)
		}
		h.restart()
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
		answers := sp.sent(bot.KindAnswer)
		if len(answers) != 1 || answers[0].msg.Text != "The whole answer." {
			t.Errorf("answers posted: %+v, want the answer once", answers)
		}
		if log := strings.Join(sp.log(), "|"); !strings.HasPrefix(log, "text:Partial |text:answer |reset|stop|text:The whole ") {
			t.Errorf("stream calls %q: want the partial answer, dropped and closed at the stop, then the answer streamed anew", log)
		}
	})
}

// pacedRecorder is a streaming platform that asks for appends at most every two seconds.
type pacedRecorder struct{ *streamRecorder }

func (pacedRecorder) StreamEvery() time.Duration { return 2 * time.Second }

// TestStreamPacer: a platform that asks for fewer appends (Slack's rate limits) gets them.
func TestStreamPacer(t *testing.T) {
	bubble(t, func(t *testing.T) {
		pieces := make([]string, 40)
		for i := range pieces {
			pieces[i] = "word "
		}
		m := &streamingModel{replies: []streamReply{{pieces: pieces, gap: 100 * time.Millisecond}}}
		h := newHarnessWith(t, bot.Config{}, m)
		m.clock = h.clock
		sp := pacedRecorder{&streamRecorder{recorder: &recorder{name: "stream"}}}
		h.others = []bot.Platform{sp}
		h.restart()
		h.event(bot.Event{Kind: bot.EventMention, User: ann, Text: "talk", Thread: streamThread})
		h.settle()
		if n := len(sp.texts()); n < 2 || n > 3 {
			t.Errorf("%d appends over 4s at one per 2s, want 2 or 3", n)
		}
	})
}
