package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/adapters/slack/slackfake"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/agenttest"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// The end-to-end tests run the real bot (bbolt store, agent loop, OpenAI-compatible client
// against llmtest's scripted server) behind this adapter, against the fake Slack of package
// slackfake: envelopes go in over the fake Socket Mode connection and everything the bot
// says comes out as recorded Web API calls. Waits are on conditions, bounded at waitLimit.

const (
	waitLimit = 10 * time.Second
	rootTS    = "1700000000.000100" // the mention that starts each test's thread
)

// callLog is the fake's record of Web API calls, which the tests inspect while the bot
// works.
type callLog struct{ f *fakeSlack }

func newCallLog(f *fakeSlack) *callLog { return &callLog{f: f} }

// of returns the calls of method, in order, for which match (if given) holds.
func (l *callLog) of(method string, match func(call) bool) []call {
	var out []call
	for _, c := range l.f.CallsOf(method) {
		if match == nil || match(c) {
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
func (l *callLog) waitCall(t *testing.T, what string, n int, method string, match func(call) bool) call {
	t.Helper()
	var got []call
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
	h   bot.Handler
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
	more  []agent.Tool
	cfg   bot.Config
	path  string
	done  chan handled
	// assistant and stream turn on the app's agent features and the model's streaming at
	// the next start; slackCfg is the rest of the adapter's config beyond the credentials
	// and the fake's URL.
	assistant, stream bool
	slackCfg          Config

	// The running process.
	db      *store.DB
	bot     *bot.Bot
	stopRun context.CancelFunc
	runDone chan error
}

func newE2E(t *testing.T, cfg bot.Config, script ...llmtest.Step) *e2e {
	t.Helper()
	return newE2EWith(t, cfg, nil, script...)
}

// newE2EWith is newE2E with more tools for the agent besides deploy.
func newE2EWith(t *testing.T, cfg bot.Config, more []agent.Tool, script ...llmtest.Step) *e2e {
	t.Helper()
	f := newFakeSlack(t)
	if cfg.EditInterval == 0 {
		// Short, so the tests do not wait a second between edits; pacing has its own test.
		cfg.EditInterval = agent.Duration(20 * time.Millisecond)
	}
	e := &e2e{
		t:     t,
		f:     f,
		log:   newCallLog(f),
		model: llmtest.NewTest(t, script...),
		tool:  &deployTool{},
		more:  more,
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
	model, err := llm.New(llm.Config{BaseURL: e.model.URL(), Model: "m", MaxRetries: -1, Stream: e.stream})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(agent.Config{MaxSteps: 10}, model, append([]agent.Tool{e.tool}, e.more...))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	scfg := e.slackCfg
	scfg.BotToken, scfg.AppToken, scfg.APIURL = "xoxb-test", "xapp-1-test", e.f.apiURL()
	scfg.Assistant = e.assistant
	a, err := New(scfg, WithLogger(logger))
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
	e.f.send("interactive", envelopeID, slackfake.ClickPayload(slackfake.Click{TriggerID: triggerID, UserID: userID, UserName: userName,
		Channel: "C1", ThreadTS: rootTS, MessageTS: messageTS, Value: value, ActionTS: "1700000300.000100"}))
	if a := e.f.nextAck(); a.EnvelopeID != envelopeID {
		e.t.Fatalf("ack for %q, want %q", a.EnvelopeID, envelopeID)
	}
}

// buttonValue returns the value of the button labelled label in a posted message's blocks:
// what Slack would send back when it is clicked.
func buttonValue(t *testing.T, c call, label string) string {
	t.Helper()
	var blocks []struct {
		Type     string            `json:"type"`
		Elements []json.RawMessage `json:"elements"`
	}
	if err := json.Unmarshal([]byte(c.Values.Get("blocks")), &blocks); err != nil {
		t.Fatalf("blocks of %s: %v", c.Method, err)
	}
	for _, b := range blocks {
		if b.Type != "actions" {
			continue
		}
		for _, raw := range b.Elements {
			var el struct {
				Type  string `json:"type"`
				Value string `json:"value"`
				Text  struct {
					Text string `json:"text"`
				} `json:"text"`
			}
			if err := json.Unmarshal(raw, &el); err != nil {
				t.Fatalf("element %s: %v", raw, err)
			}
			if el.Type == "button" && el.Text.Text == label && el.Value != "" {
				return el.Value
			}
		}
	}
	t.Fatalf("no %q button in %s", label, c.Values.Get("blocks"))
	return ""
}

// gate adds a model step that answers only once the test opens it, so the test can see the
// status card before the run can end. It opens by itself when the test ends, before the
// model server closes (which waits for its handlers).
func (e *e2e) gate(step llmtest.Step) (open func()) {
	ch := make(chan struct{})
	var once sync.Once
	open = func() { once.Do(func() { close(ch) }) }
	e.t.Cleanup(open)
	e.model.Push(llmtest.Func(func(llmtest.Request) llmtest.Step { <-ch; return step }))
	return open
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
	e := newE2E(t, bot.Config{})
	open := e.gate(llmtest.Text("The build is green."))
	e.mention("env-1", "Ev1", "is the build green?")
	h := e.handled()
	if h.res.RunID == "" || h.res.Duplicate {
		t.Fatalf("result %+v, want a new run", h.res)
	}
	runID := h.res.RunID

	card := e.log.waitCall(t, "the status card", 1, "chat.postMessage", statusCard)
	if !blocksHave("is the build green?")(card) {
		t.Errorf("status card without the goal: %s", card.Values.Get("blocks"))
	}
	open()
	e.log.waitCall(t, "the answer", 1, "chat.postMessage", and(answer, blocksHave("The build is green.")))
	cardTS := e.cardTS(runID)
	final := e.log.waitCall(t, "the card's final edit", 1, "chat.update", and(at(cardTS), blocksHave("Done")))
	if blocksHave("Cancel")(final) {
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

// TestE2EThreadReply: a reply in the thread after the answer continues the conversation:
// the second run's model request carries the first goal and answer, and its answer goes to
// the same thread.
func TestE2EThreadReply(t *testing.T) {
	e := newE2E(t, bot.Config{}, llmtest.Text("The build is green."), llmtest.Text("All 412 tests pass."))
	e.mention("env-1", "Ev1", "is the build green?")
	e.handled()
	e.log.waitCall(t, "the first answer", 1, "chat.postMessage", and(answer, blocksHave("The build is green.")))

	reply := map[string]any{"token": "x", "team_id": teamID, "api_app_id": "A1", "type": "event_callback",
		"event_id": "Ev2", "event_time": 1700000200, "event": map[string]any{
			"type": "message", "channel_type": "channel", "user": "U1", "text": "and the tests?",
			"ts": "1700000200.000100", "thread_ts": rootTS, "channel": "C1", "event_ts": "1700000200.000100"}}
	e.f.send("events_api", "env-2", reply)
	if a := e.f.nextAck(); a.EnvelopeID != "env-2" {
		t.Fatalf("ack for %q", a.EnvelopeID)
	}
	if h := e.handled(); h.ev.Kind != bot.EventReply || h.res.RunID == "" {
		t.Fatalf("reply handled as %s with %+v, want a reply that starts a run", h.ev.Kind, h.res)
	}
	e.log.waitCall(t, "the second answer", 1, "chat.postMessage", and(answer, blocksHave("All 412 tests pass.")))

	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	// The conversation so far comes as messages: the first goal, its answer, then the reply.
	var sawAnswer bool
	for _, m := range reqs[1].Messages {
		if m.Role == "assistant" && strings.Contains(m.Content, "The build is green.") {
			sawAnswer = true
		}
	}
	if last := reqs[1].LastMessage(); !sawAnswer || last.Role != "user" || !strings.Contains(last.Content, "and the tests?") {
		t.Errorf("the second run's request %+v, want the first answer as the assistant's and the reply last", reqs[1].Messages)
	}
	if first := reqs[0].Messages; len(first) >= len(reqs[1].Messages) {
		t.Errorf("the second request has %d messages, the first %d: the history is missing", len(reqs[1].Messages), len(first))
	}
	if n := len(e.log.of("chat.postMessage", statusCard)); n != 2 {
		t.Errorf("%d status cards posted, want one per run", n)
	}
	e.checkThreaded()
}

// approvalFlow starts a run whose model calls deploy and waits for the approval card; it
// returns the run, the approval and the Approve button's value as rendered on the card.
func approvalFlow(t *testing.T) (e *e2e, runID string, ap *bot.Approval, approve string) {
	t.Helper()
	e = newE2E(t, bot.Config{},
		llmtest.ToolCalls(llmtest.Call("deploy", `{"version":"1.2"}`)),
		llmtest.Text("Deployed v1.2."))
	e.mention("env-1", "Ev1", "deploy v1.2")
	runID = e.handled().res.RunID
	post := e.log.waitCall(t, "the approval card", 1, "chat.postMessage", approvalCard)
	ap = e.approval(runID)
	approve = buttonValue(t, post, "Approve once")
	if approve != ap.ApproveAction {
		t.Fatalf("the card's Approve button carries %q, the stored approval %q", approve, ap.ApproveAction)
	}
	// The status card shows the pause, whether it was first posted that way or edited to it.
	waiting := and(statusCard, blocksHave("Waiting for approval"))
	waitFor(t, "the status card waiting for approval", func() bool {
		return len(e.log.of("chat.postMessage", waiting))+len(e.log.of("chat.update", waiting)) > 0
	})
	return e, runID, ap, approve
}

// checkApproved waits for the run to finish after an approval clicked by ann, and checks
// the tool ran once and the approval card was edited in place to say who approved it.
func (e *e2e) checkApproved(ap *bot.Approval) {
	t := e.t
	t.Helper()
	e.log.waitCall(t, "the answer", 1, "chat.postMessage", and(answer, blocksHave("Deployed v1.2.")))
	edit := e.log.waitCall(t, "the approval card's edit", 1, "chat.update", and(at(ap.Card.ID), blocksHave("Approved by ann")))
	if blocksHave(`"type":"actions"`)(edit) {
		t.Errorf("the decided approval card still has buttons: %s", edit.Values.Get("blocks"))
	}
	if n := e.tool.count(); n != 1 {
		t.Errorf("deploy ran %d times, want once", n)
	}
	if n := len(e.log.of("chat.postMessage", approvalCard)); n != 1 {
		t.Errorf("approval card posted %d times, want once and then edited", n)
	}
	if reqs := e.model.Requests(); len(reqs) != 2 || !strings.Contains(reqs[1].LastMessage().Content, "deployed v1.2") {
		t.Errorf("model requests %+v, want the tool's result in the second", reqs)
	}
	e.checkThreaded()
}

// TestE2EApproveByClick: the requester presses Approve on the card; the call runs once and
// the card says who approved it.
func TestE2EApproveByClick(t *testing.T) {
	e, _, ap, approve := approvalFlow(t)
	e.click("env-click", "trig-1", "U1", "ann", ap.Card.ID, approve)
	if h := e.handled(); h.res.Notice != "" || h.res.Duplicate {
		t.Fatalf("click result %+v", h.res)
	}
	e.checkApproved(ap)
	if n := len(e.log.of("chat.postEphemeral", nil)); n != 0 {
		t.Errorf("%d ephemeral notices for a valid click", n)
	}
}

// TestE2EApproveAfterRestart: the process stops while the run waits for approval, a new one
// starts on the same store file, and the click on the card posted by the old process works.
func TestE2EApproveAfterRestart(t *testing.T) {
	e, runID, ap, approve := approvalFlow(t)
	e.stop()
	if n := e.tool.count(); n != 0 {
		t.Fatalf("deploy ran %d times before the approval", n)
	}
	e.start()
	e.view(func(tx bot.Tx) error {
		rec, err := tx.Run(runID)
		if err != nil {
			return err
		}
		if rec.Status != agent.StatusAwaitingApproval {
			t.Errorf("after the restart the run is %s, want awaiting approval", rec.Status)
		}
		return nil
	})
	e.click("env-click", "trig-1", "U1", "ann", ap.Card.ID, approve)
	if h := e.handled(); h.res.Notice != "" || h.res.Duplicate {
		t.Fatalf("click result %+v", h.res)
	}
	e.checkApproved(ap)
}

// TestE2EDuplicateDelivery: Slack delivers the same event twice at once and once more after
// the run ended; one run starts and the model is asked once.
func TestE2EDuplicateDelivery(t *testing.T) {
	e := newE2E(t, bot.Config{}, llmtest.Text("The build is green."))
	cb := mentionCallback("Ev1", "C1", rootTS, "", "<@"+botUserID+"> is the build green?")
	e.f.send("events_api", "env-a", cb)
	e.f.send("events_api", "env-b", cb)
	for range 2 {
		e.f.nextAck()
	}
	var runs, dups int
	for range 2 {
		switch h := e.handled(); {
		case h.res.Duplicate:
			dups++
		case h.res.RunID != "":
			runs++
		}
	}
	e.log.waitCall(t, "the answer", 1, "chat.postMessage", answer)
	// A late retry, once the thread has no active run that could absorb it.
	e.f.send("events_api", "env-c", cb)
	e.f.nextAck()
	if h := e.handled(); h.res.Duplicate {
		dups++
	}
	if runs != 1 || dups != 2 {
		t.Errorf("%d runs started and %d duplicates, want 1 and 2", runs, dups)
	}
	// Handle creates runs synchronously, so the store now holds every run it will.
	e.view(func(tx bot.Tx) error {
		all, err := tx.Runs(bot.RunFilter{})
		if len(all) != 1 {
			t.Errorf("%d runs stored, want 1", len(all))
		}
		return err
	})
	if n := len(e.model.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1", n)
	}
	if n := len(e.log.of("chat.postMessage", statusCard)); n != 1 {
		t.Errorf("%d status cards posted, want 1", n)
	}
}

// TestE2EClickNotAllowed: someone other than the requester presses Approve; they alone are
// told why, and the approval, the run and the card stay as they were until the requester
// approves.
func TestE2EClickNotAllowed(t *testing.T) {
	e, runID, ap, approve := approvalFlow(t)
	e.click("env-bad", "trig-bad", "U2", "bea", ap.Card.ID, approve)
	if h := e.handled(); h.res.Notice == "" {
		t.Fatalf("click by U2 gave no notice: %+v", h.res)
	}
	eph := e.log.waitCall(t, "the ephemeral notice", 1, "chat.postEphemeral", nil)
	if eph.Values.Get("user") != "U2" || eph.Values.Get("channel") != "C1" || eph.Values.Get("thread_ts") != rootTS ||
		!strings.Contains(eph.Values.Get("text"), "not allowed") {
		t.Errorf("ephemeral %v, want U2 told in the thread that they may not decide", eph.Values)
	}
	// A decision writes the approval, the audit entry and the card's outbox item in one
	// transaction, so the store shows now whether the click changed anything.
	e.view(func(tx bot.Tx) error {
		got, err := tx.Approval(ap.ID)
		if err != nil {
			return err
		}
		if got.Status != bot.ApprovalPending || got.DecidedBy.ID != "" {
			t.Errorf("approval after the refused click: %s by %q", got.Status, got.DecidedBy.ID)
		}
		rec, err := tx.Run(runID)
		if err != nil {
			return err
		}
		if rec.Status != agent.StatusAwaitingApproval {
			t.Errorf("run after the refused click: %s", rec.Status)
		}
		items, err := tx.Outbox()
		for _, it := range items {
			if it.Kind == bot.OutboxApprovalCard {
				t.Errorf("the refused click queued an approval card edit: %+v", it)
			}
		}
		return err
	})
	if n := len(e.log.of("chat.update", at(ap.Card.ID))); n != 0 {
		t.Errorf("the approval card was edited %d times after a refused click", n)
	}
	if n := e.tool.count(); n != 0 {
		t.Errorf("deploy ran %d times after a refused click", n)
	}

	e.click("env-ok", "trig-ok", "U1", "ann", ap.Card.ID, approve)
	e.handled()
	e.checkApproved(ap)
	if n := len(e.log.of("chat.postEphemeral", nil)); n != 1 {
		t.Errorf("%d ephemeral notices, want only the one to U2", n)
	}
}

// TestE2EUpdateRateLimited: Slack answers the first chat.update with 429 and Retry-After: 1.
// The bot waits that long before it calls the channel again, does not retry in a storm,
// and the card still reaches its final state.
func TestE2EUpdateRateLimited(t *testing.T) {
	const retryAfter = time.Second
	e := newE2E(t, bot.Config{})
	open := e.gate(llmtest.Text("The build is green."))
	e.f.FailNext("chat.update", 1, slackfake.RateLimited(retryAfter))

	e.mention("env-1", "Ev1", "is the build green?")
	runID := e.handled().res.RunID
	e.log.waitCall(t, "the status card", 1, "chat.postMessage", statusCard)
	open()
	cardTS := e.cardTS(runID)
	e.log.waitCall(t, "the answer", 1, "chat.postMessage", answer)
	e.log.waitCall(t, "the card's final edit", 1, "chat.update", and(at(cardTS), blocksHave("Done")))
	// The outbox is empty once the final edit is settled: nothing more is coming.
	waitFor(t, "an empty outbox", func() bool {
		var n int
		e.view(func(tx bot.Tx) error {
			items, err := tx.Outbox()
			n = len(items)
			return err
		})
		return n == 0
	})

	// When the fake received each chat.update, before answering.
	var updates []time.Time
	for _, c := range e.log.of("chat.update", nil) {
		updates = append(updates, c.At)
	}
	if len(updates) < 2 {
		t.Fatalf("%d chat.update calls, want the refused one and a retry", len(updates))
	}
	// Timers never fire early, so this holds however slow the machine is.
	if gap := updates[1].Sub(updates[0]); gap < retryAfter {
		t.Errorf("chat.update retried %s after the 429, want at least Retry-After %s", gap, retryAfter)
	}
	// One refused edit, its retry with the latest state, and at most one more state that
	// arrived after the hold: a storm would be an edit every EditInterval.
	if len(updates) > 3 {
		t.Errorf("%d chat.update calls for one card and a 429, want at most 3", len(updates))
	}
	calls := e.log.of("chat.update", nil)
	if last := calls[len(calls)-1]; !blocksHave("Done")(last) || last.Values.Get("ts") != cardTS {
		t.Errorf("the last edit is not the final card: %s", last.Values.Get("blocks"))
	}
	// The 429 holds the channel, so nothing was posted to it during the wait either.
	for _, c := range e.log.of("chat.postMessage", answer) {
		if c.At.Before(updates[0].Add(retryAfter)) {
			t.Errorf("the answer was posted %s after the 429, inside Retry-After", c.At.Sub(updates[0]))
		}
	}
}

// TestE2EReplySteersAWorkingRun: a reply in the thread while the run is in a tool call is
// acknowledged as noted, reaches the model's next request as the person's note, and starts
// no second run.
func TestE2EReplySteersAWorkingRun(t *testing.T) {
	held := agenttest.NewHeld(t, "migrate", "migrated half the tables")
	e := newE2EWith(t, bot.Config{}, []agent.Tool{held},
		llmtest.ToolCalls(llmtest.Call("migrate", `{}`)), llmtest.Text("Migrated on staging, as asked."))
	e.mention("env-1", "Ev1", "migrate the database")
	runID := e.handled().res.RunID
	select {
	case <-held.Started:
	case <-time.After(waitLimit):
		t.Fatal("the run never called the tool")
	}

	const note = "use the staging database instead"
	reply := map[string]any{"token": "x", "team_id": teamID, "api_app_id": "A1", "type": "event_callback",
		"event_id": "Ev2", "event_time": 1700000200, "event": map[string]any{
			"type": "message", "channel_type": "channel", "user": "U1", "text": note,
			"ts": "1700000200.000100", "thread_ts": rootTS, "channel": "C1", "event_ts": "1700000200.000100"}}
	e.f.send("events_api", "env-2", reply)
	if a := e.f.nextAck(); a.EnvelopeID != "env-2" {
		t.Fatalf("ack for %q", a.EnvelopeID)
	}
	if h := e.handled(); h.ev.Kind != bot.EventReply || h.res.RunID != runID || !strings.Contains(h.res.Notice, "Noted") {
		t.Fatalf("reply handled as %s with %+v, want it noted for run %s", h.ev.Kind, h.res, runID)
	}
	held.Free()
	e.log.waitCall(t, "the answer", 1, "chat.postMessage", and(answer, blocksHave("Migrated on staging")))

	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	if strings.Contains(fmt.Sprint(reqs[0].Messages), note) {
		t.Errorf("the first request already had the note: %+v", reqs[0].Messages)
	}
	var noted bool
	for _, m := range reqs[1].Messages {
		noted = noted || m.Role == "user" && strings.Contains(m.Content, "While you work") && strings.Contains(m.Content, note)
	}
	if !noted {
		t.Errorf("the next request %+v, want the person's note as a user message", reqs[1].Messages)
	}
	var runs []*bot.RunRecord
	e.view(func(tx bot.Tx) (err error) {
		runs, err = tx.Runs(bot.RunFilter{})
		return err
	})
	if len(runs) != 1 {
		t.Errorf("%d runs in the store, want the one the reply steered", len(runs))
	}
	if n := len(e.log.of("chat.postMessage", statusCard)); n != 1 {
		t.Errorf("%d status cards posted, want 1", n)
	}
	e.checkThreaded()
}
