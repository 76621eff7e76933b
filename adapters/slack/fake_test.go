package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack/slacktest"

	"github.com/loopbot/loopbot/bot"
)

// The fake Slack: slacktest serves the Web API (with loopbot's methods added or replaced
// to record calls), and a websocket server speaks Socket Mode: hello, envelopes, pings, and
// acknowledgements read back by envelope ID. Envelopes not acknowledged when a connection
// ends are delivered again on the next one, as Slack does.

const (
	botUserID = "UBOT"
	botBotID  = "BBOT"
	teamID    = "T1"
)

// call is one recorded Web API call.
type call struct {
	Method string
	Values url.Values
}

// ack is one acknowledgement read from the socket.
type ack struct {
	EnvelopeID string          `json:"envelope_id"`
	Payload    json.RawMessage `json:"payload"`
}

type fakeSlack struct {
	t      *testing.T
	api    *slacktest.Server
	ws     *httptest.Server
	calls  chan call
	acks   chan ack
	conns  chan *fakeConn
	mu     sync.Mutex
	cur    *fakeConn
	unack  map[string][]byte // envelope ID -> frame, in flight
	order  []string
	nextTS int
	// update, if set, answers chat.update instead of the default ok.
	update func(w http.ResponseWriter) bool
}

// fakeConn is one Socket Mode connection; writes are serialised as gorilla requires.
type fakeConn struct {
	wmu  sync.Mutex
	c    *websocket.Conn
	done chan struct{}
}

func (c *fakeConn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.c.WriteMessage(websocket.TextMessage, b)
}

func newFakeSlack(t *testing.T) *fakeSlack {
	t.Helper()
	f := &fakeSlack{
		t:     t,
		calls: make(chan call, 256),
		acks:  make(chan ack, 256),
		conns: make(chan *fakeConn, 16),
		unack: map[string][]byte{},
	}
	f.ws = httptest.NewServer(http.HandlerFunc(f.serveSocket))
	t.Cleanup(f.ws.Close)
	wsURL := "ws" + strings.TrimPrefix(f.ws.URL, "http") + "/link"
	f.api = slacktest.NewTestServer(func(c slacktest.Customize) {
		c.Handle("/auth.test", func(w http.ResponseWriter, r *http.Request) {
			f.record("auth.test", r)
			fmt.Fprintf(w, `{"ok":true,"team_id":%q,"user_id":%q,"bot_id":%q}`, teamID, botUserID, botBotID)
		})
		c.Handle("/apps.connections.open", func(w http.ResponseWriter, r *http.Request) {
			f.record("apps.connections.open", r)
			fmt.Fprintf(w, `{"ok":true,"url":%q}`, wsURL)
		})
		c.Handle("/chat.postMessage", func(w http.ResponseWriter, r *http.Request) {
			v := f.record("chat.postMessage", r)
			fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q}`, v.Get("channel"), f.ts())
		})
		c.Handle("/chat.update", func(w http.ResponseWriter, r *http.Request) {
			v := f.record("chat.update", r)
			f.mu.Lock()
			upd := f.update
			f.mu.Unlock()
			if upd != nil && upd(w) {
				return
			}
			fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q}`, v.Get("channel"), v.Get("ts"))
		})
		c.Handle("/chat.postEphemeral", func(w http.ResponseWriter, r *http.Request) {
			f.record("chat.postEphemeral", r)
			fmt.Fprintf(w, `{"ok":true,"message_ts":%q}`, f.ts())
		})
		c.Handle("/response_url", func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			f.calls <- call{Method: "response_url", Values: url.Values{"body": {string(body)}}}
			fmt.Fprint(w, `{"ok":true}`)
		})
	})
	f.api.Start()
	t.Cleanup(f.api.Stop)
	return f
}

func (f *fakeSlack) apiURL() string { return f.api.GetAPIURL() }

// ts returns a new, increasing message timestamp.
func (f *fakeSlack) ts() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextTS++
	return fmt.Sprintf("1700000100.%06d", f.nextTS)
}

func (f *fakeSlack) record(method string, r *http.Request) url.Values {
	_ = r.ParseForm()
	f.calls <- call{Method: method, Values: r.PostForm}
	return r.PostForm
}

// nextCall waits for the next Web API call of method, skipping others.
func (f *fakeSlack) nextCall(method string) call {
	f.t.Helper()
	for {
		select {
		case c := <-f.calls:
			if c.Method == method {
				return c
			}
		case <-time.After(10 * time.Second):
			f.t.Fatalf("no %s call", method)
		}
	}
}

// upgrader accepts the Origin slack-go sends (https://api.slack.com), as Slack does.
var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (f *fakeSlack) serveSocket(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	fc := &fakeConn{c: c, done: make(chan struct{})}
	defer close(fc.done)
	defer c.Close()
	_ = fc.write([]byte(`{"type":"hello","num_connections":1,"connection_info":{"app_id":"A1"}}`))
	f.mu.Lock()
	f.cur = fc
	var redeliver [][]byte
	for _, id := range f.order {
		if b, ok := f.unack[id]; ok {
			redeliver = append(redeliver, b)
		}
	}
	f.mu.Unlock()
	for _, b := range redeliver {
		_ = fc.write(b)
	}
	f.conns <- fc
	// Slack pings; slack-go reconnects when it hears none for 30 seconds.
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-fc.done:
				return
			case <-tick.C:
				_ = c.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second))
			}
		}
	}()
	for {
		_, b, err := c.ReadMessage()
		if err != nil {
			return
		}
		var a ack
		if json.Unmarshal(b, &a) != nil {
			continue
		}
		f.mu.Lock()
		delete(f.unack, a.EnvelopeID)
		f.mu.Unlock()
		f.acks <- a
	}
}

// conn waits for the next Socket Mode connection.
func (f *fakeSlack) conn() *fakeConn {
	f.t.Helper()
	select {
	case c := <-f.conns:
		return c
	case <-time.After(10 * time.Second):
		f.t.Fatal("the client did not connect")
		return nil
	}
}

// send delivers a Socket Mode envelope on the current connection and keeps it for
// redelivery until it is acknowledged.
func (f *fakeSlack) send(envelopeType, envelopeID string, payload any) {
	f.t.Helper()
	p, err := json.Marshal(payload)
	if err != nil {
		f.t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"type": envelopeType, "envelope_id": envelopeID, "payload": json.RawMessage(p), "accepts_response_payload": envelopeType != "events_api"})
	f.sendRaw(envelopeID, b)
}

func (f *fakeSlack) sendRaw(envelopeID string, frame []byte) {
	f.t.Helper()
	f.mu.Lock()
	if envelopeID != "" {
		f.unack[envelopeID] = frame
		f.order = append(f.order, envelopeID)
	}
	c := f.cur
	f.mu.Unlock()
	if err := c.write(frame); err != nil {
		f.t.Logf("write envelope %s: %v (it is redelivered on the next connection)", envelopeID, err)
	}
}

// nextAck waits for the next acknowledgement.
func (f *fakeSlack) nextAck() ack {
	f.t.Helper()
	select {
	case a := <-f.acks:
		return a
	case <-time.After(10 * time.Second):
		f.t.Fatal("no ack")
		return ack{}
	}
}

// adapter starts a Socket Mode adapter against the fake and returns it with the handler's
// recorder; Run ends with the test.
func (f *fakeSlack) adapter(h Handler, cfg Config) *Adapter {
	f.t.Helper()
	cfg.BotToken, cfg.AppToken, cfg.APIURL = "xoxb-test", "xapp-1-test", f.apiURL()
	a, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(testWriter{f.t}, &slog.HandlerOptions{Level: slog.LevelDebug}))))
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
	case <-time.After(10 * time.Second):
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

// Payload builders, in the shapes Slack sends.

func mentionCallback(eventID, channel, ts, threadTS, text string) map[string]any {
	ev := map[string]any{"type": "app_mention", "user": "U1", "text": text, "ts": ts, "channel": channel, "event_ts": ts}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	return map[string]any{"token": "x", "team_id": teamID, "api_app_id": "A1", "type": "event_callback",
		"event_id": eventID, "event_time": 1700000000, "event": ev}
}

func clickPayload(triggerID, value string) map[string]any {
	return map[string]any{
		"type": "block_actions", "trigger_id": triggerID, "api_app_id": "A1",
		"team":      map[string]any{"id": teamID},
		"user":      map[string]any{"id": "U2", "username": "bea", "name": "bea", "team_id": teamID},
		"channel":   map[string]any{"id": "C1", "name": "general"},
		"container": map[string]any{"type": "message", "message_ts": "1700000001.000200", "channel_id": "C1", "is_ephemeral": false, "thread_ts": "1700000000.000100"},
		"message":   map[string]any{"type": "message", "ts": "1700000001.000200", "thread_ts": "1700000000.000100", "user": botUserID},
		"actions": []map[string]any{{"type": "button", "action_id": "loopbot_button_0", "block_id": "loopbot_actions",
			"value": value, "text": map[string]any{"type": "plain_text", "text": "Approve"}, "action_ts": "1700000002.000300"}},
	}
}
