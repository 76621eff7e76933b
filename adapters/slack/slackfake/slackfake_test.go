package slackfake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
)

// The fake is driven here by slack-go's Web API client and by a bare websocket client that
// plays a Socket Mode app frame by frame, so each behaviour is checked on the wire.

func newServer(t *testing.T) *Server {
	t.Helper()
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// app is a Socket Mode client that acknowledges nothing by itself.
type app struct {
	t  *testing.T
	ws *websocket.Conn
}

// dial opens a connection the way slack-go does: apps.connections.open, then the URL it
// returns; it reads the hello.
func dial(t *testing.T, s *Server) *app {
	t.Helper()
	api := slack.New("xoxb-test", slack.OptionAPIURL(s.APIURL()), slack.OptionAppLevelToken("xapp-1-test"))
	_, u, err := api.StartSocketModeContext(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	ws, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	a := &app{t: t, ws: ws}
	if f := a.read(); f["type"] != "hello" {
		t.Fatalf("first frame %v, want hello", f)
	}
	return a
}

func (a *app) read() map[string]any {
	a.t.Helper()
	_ = a.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := a.ws.ReadMessage()
	if err != nil {
		a.t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(b, &f); err != nil {
		a.t.Fatalf("frame %s: %v", b, err)
	}
	return f
}

func (a *app) ack(id string) {
	a.t.Helper()
	if err := a.ws.WriteJSON(map[string]any{"envelope_id": id}); err != nil {
		a.t.Fatal(err)
	}
}

// TestRedelivery: an envelope sent with no connection waits for one; one not acknowledged
// when its connection drops comes again with retry_attempt 1; an ack lost with its
// connection (DropConnectionOnAck) does not count, and the envelope comes a third time.
func TestRedelivery(t *testing.T) {
	s := newServer(t)
	if err := s.Send("events_api", "env-1", MentionCallback("Ev1", "C1", "1.000100", "", "<@UBOT> go")); err != nil {
		t.Fatal(err)
	}
	if err := s.SendDisconnect("refresh_requested"); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("disconnect with no connection: %v, want ErrNotConnected", err)
	}

	first := dial(t, s)
	f := first.read()
	if f["envelope_id"] != "env-1" || f["type"] != "events_api" || f["retry_attempt"] != 0.0 || f["accepts_response_payload"] != false {
		t.Fatalf("first delivery %v", f)
	}
	if err := s.DropConnection(); err != nil {
		t.Fatal(err)
	}

	second := dial(t, s)
	if f := second.read(); f["envelope_id"] != "env-1" || f["retry_attempt"] != 1.0 || f["retry_reason"] != "timeout" {
		t.Fatalf("redelivery %v", f)
	}
	s.DropConnectionOnAck("env-1")
	second.ack("env-1")
	if err := s.Wait(ctxT(t), func() bool { return !s.Connected() }); err != nil {
		t.Fatal(err)
	}
	if got := s.Unacked(); len(got) != 1 || len(s.Acks()) != 0 {
		t.Fatalf("after the lost ack: unacked %v, acks %v", got, s.Acks())
	}

	third := dial(t, s)
	if f := third.read(); f["envelope_id"] != "env-1" || f["retry_attempt"] != 2.0 {
		t.Fatalf("third delivery %v", f)
	}
	third.ack("env-1")
	a, err := s.WaitAck(ctxT(t), "env-1")
	if err != nil {
		t.Fatal(err)
	}
	if a.Connection != 3 || a.Deliveries != 3 || a.WrittenAt.IsZero() || a.AckedAt.Before(a.WrittenAt) || a.Latency() < 0 {
		t.Errorf("ack %+v", a)
	}
	if got := s.Unacked(); len(got) != 0 {
		t.Errorf("unacked after the ack: %v", got)
	}
	if n := s.AckCount(); n != len(s.Acks()) || n != 1 {
		t.Errorf("AckCount() = %d, want 1, len(Acks())", n)
	}

	// A raw frame with an envelope ID is kept like any other; a disconnect goes out once.
	if err := s.SendRaw("env-raw", []byte(`{"type":"mystery","envelope_id":"env-raw"}`)); err != nil {
		t.Fatal(err)
	}
	if f := third.read(); f["type"] != "mystery" {
		t.Fatalf("raw frame %v", f)
	}
	if err := s.SendDisconnect("refresh_requested"); err != nil {
		t.Fatal(err)
	}
	if f := third.read(); f["type"] != "disconnect" || f["reason"] != "refresh_requested" {
		t.Fatalf("disconnect frame %v", f)
	}
	if got := s.Unacked(); len(got) != 1 || got[0] != "env-raw" {
		t.Errorf("unacked %v, want env-raw", got)
	}
}

// TestWebAPI: the methods answer as Slack does and are recorded; injected failures answer
// the next calls of their method only, in order, and are marked.
func TestWebAPI(t *testing.T) {
	s := newServer(t)
	api := slack.New("xoxb-test", slack.OptionAPIURL(s.APIURL()))
	ctx := ctxT(t)
	s.FailNext("chat.postMessage", 1, ServerError())
	s.FailNext("chat.postMessage", 1, RateLimited(1500*time.Millisecond))
	s.FailNext("chat.update", 1, APIError("message_not_found"))

	auth, err := api.AuthTestContext(ctx)
	if err != nil || auth.UserID != BotUserID || auth.BotID != BotID || auth.TeamID != TeamID {
		t.Fatalf("auth.test: %+v, %v", auth, err)
	}
	post := func() (string, error) {
		_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("hello", false))
		return ts, err
	}
	if _, err := post(); !errors.As(err, new(slack.StatusCodeError)) {
		t.Errorf("first post: %v, want a 500", err)
	}
	var rl *slack.RateLimitedError
	if _, err := post(); !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second {
		t.Errorf("second post: %v, want a rate limit of 2s (1.5s rounded up)", err)
	}
	ts1, err1 := post()
	ts2, err2 := post()
	if err1 != nil || err2 != nil || ts1 == "" || ts2 <= ts1 {
		t.Errorf("posts: %q %v, %q %v; want increasing timestamps", ts1, err1, ts2, err2)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", ts1, slack.MsgOptionText("edited", false)); err == nil || err.Error() != "message_not_found" {
		t.Errorf("update: %v, want message_not_found", err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", ts1, slack.MsgOptionText("edited", false)); err != nil {
		t.Errorf("second update: %v", err)
	}
	if _, err := api.PostEphemeralContext(ctx, "C1", "U1", slack.MsgOptionText("psst", false)); err != nil {
		t.Errorf("ephemeral: %v", err)
	}
	resp, err := http.Post(s.ResponseURL(), "application/json", bytes.NewReader([]byte(`{"text":"hi"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: "C1"}); err == nil || err.Error() != "unknown_method" {
		t.Errorf("conversations.info: %v, want unknown_method", err)
	}

	type row struct {
		method   string
		status   int
		injected bool
	}
	want := []row{{"auth.test", 200, false}, {"chat.postMessage", 500, true}, {"chat.postMessage", 429, true},
		{"chat.postMessage", 200, false}, {"chat.postMessage", 200, false}, {"chat.update", 200, true},
		{"chat.update", 200, false}, {"chat.postEphemeral", 200, false}, {"response_url", 200, false}, {"conversations.info", 200, false}}
	calls := s.Calls()
	if len(calls) != len(want) {
		t.Fatalf("%d calls recorded, want %d: %+v", len(calls), len(want), calls)
	}
	for i, c := range calls {
		if (row{c.Method, c.Status, c.Injected}) != want[i] {
			t.Errorf("call %d: %s %d injected=%v, want %+v", i, c.Method, c.Status, c.Injected, want[i])
		}
		if i > 0 && c.At.Before(calls[i-1].At) {
			t.Errorf("call %d arrived before call %d", i, i-1)
		}
	}
	if got := s.CallsOf("chat.postMessage")[2].TS; got != ts1 || s.CallsOf("chat.postMessage")[0].TS != "" {
		t.Errorf("recorded post timestamps %q, want %q for the first post taken and none for a refused one", got, ts1)
	}
	if got := s.CallsOf("chat.update")[1].Values.Get("text"); got != "edited" {
		t.Errorf("update text %q", got)
	}
	if got := s.CallsOf("response_url")[0].Values.Get("body"); got != `{"text":"hi"}` {
		t.Errorf("response_url body %q", got)
	}
}

// TestSign: what Sign produces is what slack-go's verifier accepts, and only for that body
// and secret.
func TestSign(t *testing.T) {
	body := []byte(`{"type":"event_callback"}`)
	h := Sign("secret", body, time.Now())
	check := func(secret string, body []byte) error {
		sv, err := slack.NewSecretsVerifier(h, secret)
		if err != nil {
			return err
		}
		_, _ = sv.Write(body)
		return sv.Ensure()
	}
	if err := check("secret", body); err != nil {
		t.Errorf("signed request refused: %v", err)
	}
	if err := check("other", body); err == nil {
		t.Error("accepted with another secret")
	}
	if err := check("secret", append(body, ' ')); err == nil {
		t.Error("accepted with another body")
	}
}

// TestWaitAcks: WaitAcks returns once that many acks were read, not before, and gives up
// with its context.
func TestWaitAcks(t *testing.T) {
	s := newServer(t)
	a := dial(t, s)
	for _, id := range []string{"env-1", "env-2"} {
		if err := s.Send("events_api", id, MentionCallback("Ev"+id, "C1", "1.000100", "", "<@UBOT> go")); err != nil {
			t.Fatal(err)
		}
		a.read()
	}
	done := make(chan error, 1)
	go func() { done <- s.WaitAcks(ctxT(t), 2) }()
	if err := s.Wait(ctxT(t), func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.ackWaits) == 1 }); err != nil {
		t.Fatal(err)
	}
	a.ack("env-1")
	if _, err := s.WaitAck(ctxT(t), "env-1"); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	waiting := len(s.ackWaits)
	s.mu.Unlock()
	if waiting != 1 {
		t.Fatal("WaitAcks(2) was let go after one ack")
	}
	a.ack("env-2")
	if err := <-done; err != nil {
		t.Fatalf("WaitAcks(2) after two acks: %v", err)
	}
	if err := s.WaitAcks(ctxT(t), 1); err != nil {
		t.Errorf("WaitAcks(1) with two read: %v", err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	if err := s.WaitAcks(ctx, 3); err == nil {
		t.Error("WaitAcks(3) with its context ended returned nil")
	}
}
