package bot

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// sink is a Streamer that keeps what was appended.
type sink struct{ sent strings.Builder }

func (s *sink) Streams(ThreadRef) bool { return true }
func (s *sink) StreamText(_ context.Context, _ Stream, text string) error {
	s.sent.WriteString(text)
	return nil
}
func (s *sink) StreamReset(context.Context, Stream) error { return nil }
func (s *sink) StreamStop(context.Context, Stream) error  { return nil }

// FuzzStreamRedaction streams a reply that holds configured secrets, cut into deltas at
// any places, each delta sent at once: nothing that goes out holds a secret or the first
// part of one, wherever the cuts fall.
func FuzzStreamRedaction(f *testing.F) {
	const token, phrase = "sk-live-0123456789abcdef", "correct horse battery staple"
	f.Add("The key is ", " and the phrase is "+phrase+" ok.", []byte{3, 5, 9, 2})
	f.Add("", "", []byte{1, 1, 1, 1, 1, 1, 1, 1})
	f.Add("x\n", "\ncorrect horse ", []byte{20})
	f.Fuzz(func(t *testing.T, before, after string, cuts []byte) {
		if strings.Contains(before+after, "sk-") || strings.Contains(before+after, "correct") || strings.Contains(before+after, "horse") {
			t.Skip()
		}
		text := before + token + " " + phrase + after
		now := time.Unix(0, 0)
		ss := &streams{redactor: NewRedactor([]string{token, phrase}), now: func() time.Time { return now }, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		out := &sink{}
		ts := &textStream{ss: ss, p: out, every: streamEvery}
		ctx := context.Background()
		for len(text) > 0 {
			n := len(text)
			if len(cuts) > 0 {
				n = min(n, int(cuts[0])+1)
				cuts = cuts[1:]
			}
			now = now.Add(streamEvery)
			ts.text(ctx, agent.TextDelta{Text: text[:n]})
			text = text[n:]
		}
		sent := out.sent.String()
		for _, part := range []string{token[:10], "correct horse", "horse battery"} {
			if strings.Contains(sent, part) {
				t.Fatalf("streamed %q, which holds %q", sent, part)
			}
		}
	})
}
