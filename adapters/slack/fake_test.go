package slack

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/adapters/slack/slackfake"
	"github.com/loopbot/loopbot/bot"
)

// The fake Slack is package slackfake; fakeSlack adds what a test wants on top: waits that
// fail the test, cursors over the calls and acks already looked at, and an adapter wired to
// the fake.

const (
	botUserID = slackfake.BotUserID
	botBotID  = slackfake.BotID
	teamID    = slackfake.TeamID
)

// fakeWait bounds every wait on the fake.
const fakeWait = 10 * time.Second

type (
	call = slackfake.Call
	ack  = slackfake.Ack
)

type fakeSlack struct {
	*slackfake.Server
	t *testing.T
	// Cursors: the calls nextCall has gone past, the acks nextAck returned, the
	// connections conn waited for.
	calls, acks, conns int
}

func newFakeSlack(t *testing.T) *fakeSlack {
	t.Helper()
	s, err := slackfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &fakeSlack{Server: s, t: t}
}

func (f *fakeSlack) apiURL() string { return f.APIURL() }

// wait waits for cond on the fake's records, failing the test after fakeWait.
func (f *fakeSlack) wait(what string, cond func() bool) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fakeWait)
	defer cancel()
	if err := f.Wait(ctx, cond); err != nil {
		f.t.Fatalf("%s: %v", what, err)
	}
}

// nextCall waits for the next Web API call of method, skipping others.
func (f *fakeSlack) nextCall(method string) call {
	f.t.Helper()
	for {
		var calls []call
		f.wait("no "+method+" call", func() bool { calls = f.Calls(); return len(calls) > f.calls })
		c := calls[f.calls]
		f.calls++
		if c.Method == method {
			return c
		}
	}
}

// conn waits for the next Socket Mode connection.
func (f *fakeSlack) conn() {
	f.t.Helper()
	f.conns++
	f.wait("the client did not connect", func() bool { return f.Connections() >= f.conns })
}

// send delivers a Socket Mode envelope; see slackfake.Server.Send.
func (f *fakeSlack) send(envelopeType, envelopeID string, payload any) {
	f.t.Helper()
	if err := f.Send(envelopeType, envelopeID, payload); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeSlack) sendRaw(envelopeID string, frame []byte) {
	f.t.Helper()
	if err := f.SendRaw(envelopeID, frame); err != nil {
		f.t.Fatal(err)
	}
}

// nextAck waits for the next acknowledgement.
func (f *fakeSlack) nextAck() ack {
	f.t.Helper()
	var acks []ack
	f.wait("no ack", func() bool { acks = f.Acks(); return len(acks) > f.acks })
	f.acks++
	return acks[f.acks-1]
}

// adapter starts a Socket Mode adapter against the fake; Run ends with the test. opts
// apply after the test's logger, so they may replace it.
func (f *fakeSlack) adapter(h bot.Handler, cfg Config, opts ...Option) *Adapter {
	f.t.Helper()
	cfg.BotToken, cfg.AppToken, cfg.APIURL = "xoxb-test", "xapp-1-test", f.apiURL()
	opts = append([]Option{WithLogger(slog.New(slog.NewTextHandler(testWriter{f.t}, &slog.HandlerOptions{Level: slog.LevelDebug})))}, opts...)
	a, err := New(cfg, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, h) }()
	f.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			f.t.Errorf("Run: %v", err)
		}
	})
	return a
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// recorder is a Handler that records events and answers with result.
type recorder struct {
	events chan bot.Event
	mu     sync.Mutex
	result func(bot.Event) bot.Result
	before func(bot.Event) error
}

func newRecorder() *recorder { return &recorder{events: make(chan bot.Event, 64)} }

func (r *recorder) Handle(ctx context.Context, ev bot.Event) (bot.Result, error) {
	r.mu.Lock()
	before, result := r.before, r.result
	r.mu.Unlock()
	if before != nil {
		if err := before(ev); err != nil {
			return bot.Result{}, err
		}
	}
	r.events <- ev
	if result != nil {
		return result(ev), nil
	}
	return bot.Result{}, nil
}

func (r *recorder) next(t *testing.T) bot.Event {
	t.Helper()
	select {
	case ev := <-r.events:
		return ev
	case <-time.After(fakeWait):
		t.Fatal("Handle was not called")
		return bot.Event{}
	}
}

// none checks that Handle has no event left to report.
func (r *recorder) none(t *testing.T) {
	t.Helper()
	select {
	case ev := <-r.events:
		t.Fatalf("unexpected event %+v", ev)
	default:
	}
}

// mentionCallback is slackfake.MentionCallback, by U1.
func mentionCallback(eventID, channel, ts, threadTS, text string) map[string]any {
	return slackfake.MentionCallback(eventID, channel, ts, threadTS, text)
}

// clickPayload is bea's click on a button of the bot's message 1700000001.000200 in the
// thread 1700000000.000100 of C1.
func clickPayload(triggerID, value string) map[string]any {
	return slackfake.ClickPayload(slackfake.Click{TriggerID: triggerID, UserID: "U2", UserName: "bea",
		Channel: "C1", ThreadTS: "1700000000.000100", MessageTS: "1700000001.000200", Value: value, ActionTS: "1700000002.000300"})
}
