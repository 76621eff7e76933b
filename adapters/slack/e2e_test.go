package slack

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// The end-to-end tests run the real bot (bbolt store, agent loop, OpenAI-compatible client
// against llmtest's scripted server) behind this adapter, against the fake Slack of
// fake_test.go: envelopes go in over the fake Socket Mode connection and everything the bot
// says comes out as recorded Web API calls. Waits are on conditions, bounded at waitLimit.

const (
	waitLimit = 10 * time.Second
	rootTS    = "1700000000.000100" // the mention that starts each test's thread
)

// timedCall is a recorded Web API call with the moment the test saw it.
type timedCall struct {
	call
	At time.Time
}

// callLog drains the fake's calls into a list the tests inspect while the bot works.
type callLog struct {
	mu    sync.Mutex
	calls []timedCall
}

func newCallLog(t *testing.T, f *fakeSlack) *callLog {
	l := &callLog{}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case c := <-f.calls:
				l.mu.Lock()
				l.calls = append(l.calls, timedCall{call: c, At: time.Now()})
				l.mu.Unlock()
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return l
}

// of returns the calls of method, in order, for which match (if given) holds.
func (l *callLog) of(method string, match func(call) bool) []timedCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []timedCall
	for _, c := range l.calls {
		if c.Method == method && (match == nil || match(c.call)) {
			out = append(out, c)
		}
	}
	return out
}

// waitFor polls cond until it holds, failing the test after waitLimit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitCall waits for the n-th (1-based) call of method that matches and returns it.
func (l *callLog) waitCall(t *testing.T, what string, n int, method string, match func(call) bool) timedCall {
	t.Helper()
	var got []timedCall
	waitFor(t, what, func() bool { got = l.of(method, match); return len(got) >= n })
	return got[n-1]
}

// Matchers on what a recorded call carries. Every kind of bot message has its own emoji in
// its header or first line (render.go), which tells the kinds apart.
func blocksHave(s string) func(call) bool {
	return func(c call) bool { return strings.Contains(c.Values.Get("blocks"), s) }
}

func statusCard(c call) bool   { return blocksHave(kindEmoji[bot.KindStatus])(c) }
func approvalCard(c call) bool { return blocksHave(kindEmoji[bot.KindApproval])(c) }
func answer(c call) bool       { return blocksHave(kindEmoji[bot.KindAnswer])(c) }

func at(ts string) func(call) bool {
	return func(c call) bool { return c.Values.Get("ts") == ts }
}

func and(ms ...func(call) bool) func(call) bool {
	return func(c call) bool {
		for _, m := range ms {
			if !m(c) {
				return false
			}
		}
		return true
	}
}

// handled is one delivery the bot handled, with its result.
type handled struct {
	ev  bot.Event
	res bot.Result
	err error
}

// observer passes deliveries to the bot and reports each result, so a test knows when a
// delivery (a duplicate, say, which changes nothing visible) has been dealt with.
type observer struct {
	h   Handler
	out chan handled
}

func (o observer) Handle(ctx context.Context, ev bot.Event) (bot.Result, error) {
	res, err := o.h.Handle(ctx, ev)
	o.out <- handled{ev, res, err}
	return res, err
}

// deployTool is a tool that needs approval, and counts its runs.
type deployTool struct {
	mu    sync.Mutex
	calls int
}

func (d *deployTool) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: "deploy", Description: "deploys the site",
		Parameters: json.RawMessage(`{"type":"object","properties":{"version":{"type":"string"}},"required":["version"]}`)}}
}

func (d *deployTool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskConfirm, Reason: "changes production"}
}

func (d *deployTool) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	return "deployed v1.2", nil
}

func (d *deployTool) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

// e2e is one test's world: the fake Slack, the scripted model, the store file, and the
// bot process currently running on them (one at a time, as after a restart).
type e2e struct {
	t     *testing.T
	f     *fakeSlack
	log   *callLog
	model *llmtest.Server
	tool  *deployTool
	cfg   bot.Config
	path  string
	done  chan handled

	// The running process.
	db      *store.DB
	bot     *bot.Bot
	stopRun context.CancelFunc
	runDone chan error
}

func newE2E(t *testing.T, cfg bot.Config, script ...llmtest.Step) *e2e {
	t.Helper()
	f := newFakeSlack(t)
	if cfg.EditInterval == 0 {
		// Short, so the tests do not wait a second between edits; pacing has its own test.
		cfg.EditInterval = bot.Duration(20 * time.Millisecond)
	}
	e := &e2e{
		t:     t,
		f:     f,
		log:   newCallLog(t, f),
		model: llmtest.NewTest(t, script...),
		tool:  &deployTool{},
		cfg:   cfg,
		path:  filepath.Join(t.TempDir(), "loopbot.db"),
		done:  make(chan handled, 64),
	}
	e.start()
	t.Cleanup(e.stop)
	return e
}

// start opens the store and starts a bot with this adapter in front of it, as a loopbot
// process does, and waits for the Socket Mode connection.
func (e *e2e) start() {
	t := e.t
	t.Helper()
	db, err := store.Open(e.path)
	if err != nil {
		t.Fatal(err)
	}
	model, err := llm.New(llm.Config{BaseURL: e.model.URL(), Model: "m", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(agent.Config{MaxSteps: 10}, model, []agent.Tool{e.tool})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := New(Config{BotToken: "xoxb-test", AppToken: "xapp-1-test", APIURL: e.f.apiURL()}, WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(e.cfg, db, ag, []bot.Platform{a}, bot.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- a.Run(ctx, observer{h: b, out: e.done}) }()
	e.db, e.bot, e.stopRun, e.runDone = db, b, cancel, runDone
	e.f.conn()
}

// stop ends the process: the adapter stops receiving, the bot stops (its runs save their
// state) and the store is closed. It does nothing when no process runs.
func (e *e2e) stop() {
	t := e.t
	t.Helper()
	if e.bot == nil {
		return
	}
	e.stopRun()
	if err := <-e.runDone; err != nil {
		t.Errorf("adapter Run: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := e.bot.Stop(ctx); err != nil {
		t.Errorf("stop bot: %v", err)
	}
	if err := e.db.Close(); err != nil {
		t.Errorf("close store: %v", err)
	}
	e.bot, e.db = nil, nil
}

// handled waits for the bot to have handled the next delivery.
func (e *e2e) handled() handled {
	e.t.Helper()
	select {
	case h := <-e.done:
		if h.err != nil {
			e.t.Fatalf("handle %s: %v", h.ev.ID, h.err)
		}
		return h
	case <-time.After(waitLimit):
		e.t.Fatal("the bot did not handle the delivery")
		return handled{}
	}
}

// mention sends an app_mention envelope by U1 at the root of the test's thread and
// checks that it is acknowledged.
func (e *e2e) mention(envelopeID, eventID, text string) {
	e.t.Helper()
	e.f.send("events_api", envelopeID, mentionCallback(eventID, "C1", rootTS, "", "<@"+botUserID+"> "+text))
	if a := e.f.nextAck(); a.EnvelopeID != envelopeID {
		e.t.Fatalf("ack for %q, want %q", a.EnvelopeID, envelopeID)
	}
}

// click sends the block_actions envelope Slack sends when user presses the button whose
// value is value on the message at messageTS in the test's thread.
func (e *e2e) click(envelopeID, triggerID, userID, userName, messageTS, value string) {
	e.t.Helper()
	e.f.send("interactive", envelopeID, map[string]any{
		"type": "block_actions", "trigger_id": triggerID, "api_app_id": "A1",
		"team":      map[string]any{"id": teamID},
		"user":      map[string]any{"id": userID, "username": userName, "name": userName, "team_id": teamID},
		"channel":   map[string]any{"id": "C1", "name": "general"},
		"container": map[string]any{"type": "message", "message_ts": messageTS, "channel_id": "C1", "is_ephemeral": false, "thread_ts": rootTS},
		"message":   map[string]any{"type": "message", "ts": messageTS, "thread_ts": rootTS, "user": botUserID},
		"actions": []map[string]any{{"type": "button", "action_id": actionID(0), "block_id": "loopbot_actions",
			"value": value, "text": map[string]any{"type": "plain_text", "text": "Approve"}, "action_ts": "1700000300.000100"}},
	})
	if a := e.f.nextAck(); a.EnvelopeID != envelopeID {
		e.t.Fatalf("ack for %q, want %q", a.EnvelopeID, envelopeID)
	}
}

// buttonValue returns the value of the button labelled label in a posted message's blocks:
// what Slack would send back when it is clicked.
func buttonValue(t *testing.T, c call, label string) string {
	t.Helper()
	var blocks []struct {
		Type     string `json:"type"`
		Elements []struct {
			Type  string `json:"type"`
			Value string `json:"value"`
			Text  struct {
				Text string `json:"text"`
			} `json:"text"`
		} `json:"elements"`
	}
	if err := json.Unmarshal([]byte(c.Values.Get("blocks")), &blocks); err != nil {
		t.Fatalf("blocks of %s: %v", c.Method, err)
	}
	for _, b := range blocks {
		for _, el := range b.Elements {
			if b.Type == "actions" && el.Type == "button" && el.Text.Text == label && el.Value != "" {
				return el.Value
			}
		}
	}
	t.Fatalf("no %q button in %s", label, c.Values.Get("blocks"))
	return ""
}

// gate is a model step that answers only once the test opens it, so the test can see the
// status card before the run can end. It opens by itself when the test ends.
func gate(t *testing.T, step llmtest.Step) (llmtest.Step, func()) {
	ch := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(ch) }) }
	t.Cleanup(open)
	return llmtest.Func(func(llmtest.Request) llmtest.Step { <-ch; return step }), open
}

// checkThreaded fails unless every post and edit went to the test's channel, and every
// post into the test's thread.
func (e *e2e) checkThreaded() {
	e.t.Helper()
	for _, c := range e.log.of("chat.postMessage", nil) {
		if c.Values.Get("channel") != "C1" || c.Values.Get("thread_ts") != rootTS {
			e.t.Errorf("posted outside the thread: channel %q thread_ts %q", c.Values.Get("channel"), c.Values.Get("thread_ts"))
		}
	}
	for _, c := range e.log.of("chat.update", nil) {
		if c.Values.Get("channel") != "C1" {
			e.t.Errorf("edited in channel %q", c.Values.Get("channel"))
		}
	}
}

// TestE2EMentionToAnswer: a mention is acknowledged, starts a run whose status card is
// posted in the thread and then edited in place, and the answer is posted in the thread.
func TestE2EMentionToAnswer(t *testing.T) {
	step, open := gate(t, llmtest.Text("The build is green."))
	e := newE2E(t, bot.Config{}, step)
	e.mention("env-1", "Ev1", "is the build green?")
	h := e.handled()
	if h.res.RunID == "" || h.res.Duplicate {
		t.Fatalf("result %+v, want a new run", h.res)
	}
	runID := h.res.RunID

	card := e.log.waitCall(t, "the status card", 1, "chat.postMessage", statusCard)
	if !blocksHave("is the build green?")(card.call) {
		t.Errorf("status card without the goal: %s", card.Values.Get("blocks"))
	}
	open()
	e.log.waitCall(t, "the answer", 1, "chat.postMessage", and(answer, blocksHave("The build is green.")))
	cardTS := e.cardTS(runID)
	final := e.log.waitCall(t, "the card's final edit", 1, "chat.update", and(at(cardTS), blocksHave("Done")))
	if blocksHave("Cancel")(final.call) {
		t.Errorf("a finished run's card still has its Cancel button: %s", final.Values.Get("blocks"))
	}

	if n := len(e.log.of("chat.postMessage", statusCard)); n != 1 {
		t.Errorf("status card posted %d times, want once and then edited", n)
	}
	for _, c := range e.log.of("chat.update", nil) {
		if c.Values.Get("ts") != cardTS {
			t.Errorf("chat.update of %q, want only the card %q", c.Values.Get("ts"), cardTS)
		}
	}
	e.checkThreaded()
	if reqs := e.model.Requests(); len(reqs) != 1 || !strings.Contains(reqs[0].Messages[len(reqs[0].Messages)-1].Content, "is the build green?") {
		t.Errorf("model requests %+v, want one with the goal last", reqs)
	}
}

// view reads the store of the running process.
func (e *e2e) view(fn func(tx bot.Tx) error) {
	e.t.Helper()
	if err := e.db.View(context.Background(), fn); err != nil {
		e.t.Fatal(err)
	}
}

// cardTS waits for the run's status card to be stored as posted and returns its ts, the
// one Slack answered the post with.
func (e *e2e) cardTS(runID string) string {
	e.t.Helper()
	var ts string
	waitFor(e.t, "the stored card reference", func() bool {
		e.view(func(tx bot.Tx) error {
			rec, err := tx.Run(runID)
			if err != nil {
				return err
			}
			ts = rec.Card.ID
			return nil
		})
		return ts != ""
	})
	return ts
}

// approval waits for the run's one approval request to be stored with its card posted.
func (e *e2e) approval(runID string) *bot.Approval {
	e.t.Helper()
	var ap *bot.Approval
	waitFor(e.t, "the stored approval card", func() bool {
		e.view(func(tx bot.Tx) error {
			aps, err := tx.Approvals(runID)
			if err != nil || len(aps) != 1 {
				return err
			}
			ap = aps[0]
			return nil
		})
		return ap != nil && ap.Card.ID != ""
	})
	return ap
}
