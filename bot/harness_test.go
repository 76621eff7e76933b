package bot_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// thread is where most tests talk to the bot.
var thread = bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}

var (
	ann   = bot.User{ID: "U1", Name: "ann"}
	bob   = bot.User{ID: "U2", Name: "bob"}
	eve   = bot.User{ID: "U9", Name: "eve"}
	boss  = bot.User{ID: "U7", Name: "boss"}
	robot = bot.User{ID: "B1", Name: "otherbot", Bot: true}
)

// noProgressOff turns the loop's no-progress pause off: the fake tools here answer the same
// every time, which is what that check looks for, and it has its own tests in package agent.
const noProgressOff = -1

// op is one call the bot made to the recording platform.
type op struct {
	kind string // "post", "update" or "notify"
	ref  bot.MessageRef
	msg  bot.Message
	at   time.Time
	err  error
}

// recorder is an in-memory Platform that records every call, successful or not. fail, if
// set, decides the outcome of a call before it is recorded.
type recorder struct {
	// name is the platform's name, "test" if empty.
	name string
	mu   sync.Mutex
	ops  []op
	n    int
	fail func(o op) error
	// changed is closed at the next recorded call, for tests that run in real time.
	changed chan struct{}
}

// record appends o and wakes whoever awaits a change. r.mu is held.
func (r *recorder) record(o op) {
	r.ops = append(r.ops, o)
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// await waits in real time, for tests outside a synctest bubble, until cond holds after some
// recorded call, and fails the test if that takes more than ten seconds.
func (r *recorder) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		changed := r.changed
		r.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

var _ bot.Platform = (*recorder)(nil)

func (r *recorder) Name() string {
	if r.name == "" {
		return "test"
	}
	return r.name
}

func (r *recorder) Post(ctx context.Context, th bot.ThreadRef, msg bot.Message) (bot.MessageRef, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := op{kind: "post", ref: bot.MessageRef{Thread: th, ID: fmt.Sprintf("m%d", r.n+1)}, msg: msg, at: time.Now()}
	if r.fail != nil {
		o.err = r.fail(o)
	}
	r.record(o)
	if o.err != nil {
		return bot.MessageRef{}, o.err
	}
	r.n++
	return o.ref, nil
}

func (r *recorder) Update(ctx context.Context, ref bot.MessageRef, msg bot.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := op{kind: "update", ref: ref, msg: msg, at: time.Now()}
	if r.fail != nil {
		o.err = r.fail(o)
	}
	r.record(o)
	return o.err
}

func (r *recorder) Notify(ctx context.Context, th bot.ThreadRef, userID, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record(op{kind: "notify", ref: bot.MessageRef{Thread: th}, msg: bot.Message{Kind: bot.KindNotice, Text: text}, at: time.Now()})
	return nil
}

// sent returns the successful calls that carried a message of kind (all kinds if empty).
func (r *recorder) sent(kind bot.MessageKind) []op {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []op
	for _, o := range r.ops {
		if o.err == nil && (kind == "" || o.msg.Kind == kind) {
			out = append(out, o)
		}
	}
	return out
}

// shown is what a posted message shows now, after its edits.
func (r *recorder) shown(id string) bot.Message {
	var m bot.Message
	for _, o := range r.sent("") {
		if o.ref.ID == id {
			m = o.msg
		}
	}
	return m
}

// allText is every text the bot sent, for checks that something was never posted.
func (r *recorder) allText() string {
	var b strings.Builder
	for _, o := range r.sent("") {
		j, _ := json.Marshal(o.msg)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

func say(s string) llmtest.Step { return llmtest.Text(s) }

func use(name, args string) llmtest.Step { return llmtest.ToolCalls(llmtest.Call(name, args)) }

// model is the scripted OpenAI-compatible server of llmtest, reached by the real model
// client through a transport that calls its handler in-process: no sockets, so a synctest
// bubble can hold it and fake time flows.
type model struct {
	srv    *llmtest.Server
	client *llm.Client
}

func newModel(t testing.TB) *model {
	t.Helper()
	srv := llmtest.New()
	client, err := llm.New(llm.Config{BaseURL: "http://llmtest.invalid/v1", Model: "test-model", MaxRetries: -1},
		llm.WithHTTPClient(&http.Client{Transport: handlerTransport{srv}}))
	if err != nil {
		t.Fatalf("new model client: %v", err)
	}
	return &model{srv: srv, client: client}
}

// handlerTransport answers HTTP requests with a handler in the same process.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

func (m *model) add(steps ...llmtest.Step) { m.srv.Push(steps...) }

func (m *model) requests() []llmtest.Request { return m.srv.Requests() }

// saw reports whether any request carried a message of role containing s.
func (m *model) saw(role agent.Role, s string) bool {
	for _, req := range m.srv.Requests() {
		for _, msg := range req.Messages {
			if msg.Role == string(role) && strings.Contains(msg.Content, s) {
				return true
			}
		}
	}
	return false
}

// tool is a test tool that counts its calls. block makes a call wait for its context;
// delay makes it take that long.
type tool struct {
	name  string
	risk  agent.Risk
	out   string
	block bool
	delay time.Duration
	calls atomic.Int32
}

func (t *tool) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: t.name, Description: "test tool",
		Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}}
}

func (t *tool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: t.risk, Reason: "the test says " + t.risk.String()}
}

func (t *tool) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	t.calls.Add(1)
	if t.block {
		<-ctx.Done()
		return "", context.Cause(ctx)
	}
	if t.delay > 0 {
		time.Sleep(t.delay)
	}
	return t.out, nil
}

// clock is time.Now (which synctest fakes) plus a skip a test can add, to move the bot's
// clock past a deadline without letting timers fire.
type clock struct{ skip atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.skip.Load())) }
func (c *clock) Advance(d time.Duration) { c.skip.Add(int64(d)) }

// harness is a bot on a real bbolt store with a recording platform and the real agent,
// whose real model client talks to llmtest's scripted server. Made with newHarness it must live in a synctest bubble.
type harness struct {
	t     *testing.T
	path  string
	db    *store.DB
	cfg   bot.Config
	plat  *recorder
	model *model
	// llm, if set, is the agent's model instead of model's client.
	llm   agent.Model
	tools []agent.Tool
	// others are platforms the bot has besides plat.
	others []bot.Platform
	// storeTools, if set, makes tools over the store each open opens (the remember tool).
	storeTools func(s bot.Store, cfg bot.Config) []agent.Tool
	// sanity, if set, is the agent's sanity model.
	sanity *model
	clock  *clock
	bot    *bot.Bot
	evs    int
}

func newHarness(t *testing.T, cfg bot.Config, tools ...agent.Tool) *harness {
	t.Helper()
	return newHarnessWith(t, cfg, nil, tools...)
}

// newHarnessWith makes a harness whose agent consults m (the in-process server if nil).
func newHarnessWith(t *testing.T, cfg bot.Config, m agent.Model, tools ...agent.Tool) *harness {
	t.Helper()
	if cfg.EditInterval == 0 {
		cfg.EditInterval = agent.Duration(time.Second)
	}
	h := &harness{t: t, path: filepath.Join(t.TempDir(), "bot.db"), cfg: cfg, plat: &recorder{}, model: newModel(t), llm: m, tools: tools, clock: &clock{}}
	h.open()
	t.Cleanup(h.close)
	return h
}

// open opens the store and starts a bot on it, as a process start does.
func (h *harness) open() {
	h.t.Helper()
	db, err := store.Open(h.path)
	if err != nil {
		h.t.Fatalf("open store: %v", err)
	}
	var m agent.Model = h.model.client
	if h.llm != nil {
		m = h.llm
	}
	tools := h.tools
	if h.storeTools != nil {
		tools = append(slices.Clone(tools), h.storeTools(db, h.cfg)...)
	}
	var opts []agent.Option
	if h.sanity != nil {
		opts = append(opts, agent.WithSanity(h.sanity.client))
	}
	ag, err := agent.New(agent.Config{MaxSteps: 400, NoProgressSteps: noProgressOff}, m, tools, opts...)
	if err != nil {
		h.t.Fatalf("new agent: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(h.t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := bot.New(h.cfg, db, ag, append([]bot.Platform{h.plat}, h.others...), bot.WithClock(h.clock.Now), bot.WithLogger(logger))
	if err != nil {
		h.t.Fatalf("new bot: %v", err)
	}
	if err := b.Start(h.t.Context()); err != nil {
		h.t.Fatalf("start bot: %v", err)
	}
	h.db, h.bot = db, b
}

// close stops the bot, checks the store's consistency and closes it.
func (h *harness) close() {
	h.t.Helper()
	if h.bot == nil {
		return
	}
	if err := h.bot.Stop(context.Background()); err != nil {
		h.t.Errorf("stop bot: %v", err)
	}
	if err := h.db.Check(context.Background()); err != nil {
		h.t.Errorf("store check: %v", err)
	}
	if err := h.db.Close(); err != nil {
		h.t.Errorf("close store: %v", err)
	}
	h.bot = nil
}

// restart stops the bot and closes the store, then opens both again.
func (h *harness) restart() {
	h.t.Helper()
	h.close()
	h.open()
}

// event sends an event and fails the test on an error.
func (h *harness) event(ev bot.Event) bot.Result {
	h.t.Helper()
	if ev.ID == "" {
		h.evs++
		ev.ID = fmt.Sprintf("ev-%d", h.evs)
	}
	if ev.Thread == (bot.ThreadRef{}) {
		ev.Thread = thread
	}
	res, err := h.bot.Handle(context.Background(), ev)
	if err != nil {
		h.t.Fatalf("handle %+v: %v", ev, err)
	}
	return res
}

func (h *harness) mention(u bot.User, text string) bot.Result {
	h.t.Helper()
	return h.event(bot.Event{Kind: bot.EventMention, User: u, Text: text})
}

func (h *harness) click(u bot.User, actionID string) bot.Result {
	h.t.Helper()
	return h.event(bot.Event{Kind: bot.EventAction, User: u, ActionID: actionID})
}

// settle lets fake time pass until no run is queued or running and the outbox is empty.
func (h *harness) settle() {
	h.t.Helper()
	for range 1000 {
		synctest.Wait()
		var left int
		err := h.db.View(context.Background(), func(tx bot.Tx) error {
			items, err := tx.Outbox()
			if err != nil {
				return err
			}
			busy, err := tx.Runs(bot.RunFilter{Statuses: []agent.Status{agent.StatusQueued, agent.StatusRunning}})
			left = len(items) + len(busy)
			return err
		})
		if err != nil {
			h.t.Fatalf("read outbox: %v", err)
		}
		if left == 0 {
			return
		}
		time.Sleep(time.Duration(h.cfg.EditInterval))
	}
	h.t.Fatal("the runs and the outbox never settled")
}

// run returns the stored record of a run.
func (h *harness) run(id string) *bot.RunRecord {
	h.t.Helper()
	var rec *bot.RunRecord
	err := h.db.View(context.Background(), func(tx bot.Tx) error {
		var err error
		rec, err = tx.Run(id)
		return err
	})
	if err != nil {
		h.t.Fatalf("load run %s: %v", id, err)
	}
	return rec
}

// approvals returns the stored approvals of a run.
func (h *harness) approvals(runID string) []*bot.Approval {
	h.t.Helper()
	var aps []*bot.Approval
	err := h.db.View(context.Background(), func(tx bot.Tx) error {
		var err error
		aps, err = tx.Approvals(runID)
		return err
	})
	if err != nil {
		h.t.Fatalf("load approvals: %v", err)
	}
	return aps
}

// buttons returns the buttons of the latest approval card as the thread shows it.
func (h *harness) buttons() (approve, reject bot.Button) {
	h.t.Helper()
	cards := h.plat.sent(bot.KindApproval)
	if len(cards) == 0 {
		h.t.Fatal("no approval card was posted")
	}
	return h.button("Approve once"), h.button("Reject")
}

// button returns the button labelled label of the latest approval card as the thread shows
// it.
func (h *harness) button(label string) bot.Button {
	h.t.Helper()
	cards := h.plat.sent(bot.KindApproval)
	if len(cards) == 0 {
		h.t.Fatal("no approval card was posted")
	}
	bs := h.plat.shown(cards[len(cards)-1].ref.ID).Buttons
	for _, b := range bs {
		if b.Label == label {
			return b
		}
	}
	h.t.Fatalf("approval card has buttons %+v, none labelled %q", bs, label)
	return bot.Button{}
}

func (h *harness) wantStatus(runID string, want agent.Status) {
	h.t.Helper()
	if got := h.run(runID).Status; got != want {
		h.t.Fatalf("run status = %s, want %s", got, want)
	}
}

// bubble runs f in a synctest bubble.
func bubble(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	synctest.Test(t, f)
}
