package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopbot/loopbot/adapters/discord/discordfake"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/agenttest"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// The end-to-end tests run the real bot (bbolt store, agent loop, outbox dispatcher) with
// this adapter in gateway mode against the fake Discord, and the real OpenAI-compatible
// client against llmtest's scripted server. Nothing of our own is mocked: events arrive as
// INTERACTION_CREATE over the fake's websocket, and everything the bot shows is read back
// from the fake's REST log and messages.

// waitLimit bounds every wait of these tests.
const waitLimit = 10 * time.Second

// deployTool is a tool that needs an approval and counts its runs.
type deployTool struct{ calls atomic.Int32 }

func (d *deployTool) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: "deploy", Description: "deploys the site",
		Parameters: json.RawMessage(`{"type":"object","properties":{"version":{"type":"string"}}}`)}}
}

func (d *deployTool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskConfirm, Reason: "changes production"}
}

func (d *deployTool) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	d.calls.Add(1)
	return "deployed v1.2", nil
}

// e2e is one loopbot deployment against the fake Discord: the store, the model and the tool
// outlive a restart; the adapter and the bot are replaced by it.
type e2e struct {
	f    *FakeDiscord
	llm  *llmtest.Server
	db   *store.DB
	tool *deployTool
	// more are tools the agent has besides deploy, set before start.
	more []agent.Tool
	cfg  bot.Config
	// stop stops the running adapter and bot; nil when none runs.
	stop func(t *testing.T)
}

func newE2E(t *testing.T, cfg bot.Config, script ...llmtest.Step) *e2e {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "loopbot.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Check(context.Background()); err != nil {
			t.Errorf("store check: %v", err)
		}
		db.Close()
	})
	e := &e2e{f: NewFakeDiscord(t), llm: llmtest.NewTest(t, script...), db: db, tool: &deployTool{}, cfg: cfg}
	t.Cleanup(func() {
		if e.stop != nil {
			e.stop(t)
		}
	})
	return e
}

// start runs a new adapter and a new bot on e's store, as a fresh process would, and waits
// until the adapter's gateway connection is up.
func (e *e2e) start(t *testing.T) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := New(testConfig(e.f), WithClock(e.f.Now), WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	model, err := llm.New(llm.Config{BaseURL: e.llm.URL(), Model: "m", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(agent.Config{}, model, append([]agent.Tool{e.tool}, e.more...))
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(e.cfg, e.db, ag, []bot.Platform{a}, bot.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, b) }()
	e.stop = func(t *testing.T) {
		t.Helper()
		e.stop = nil
		// As cmd/loopbot does: no new events, then the bot saves its runs.
		cancel()
		if err := <-done; err != nil {
			t.Errorf("adapter Run: %v", err)
		}
		sctx, scancel := context.WithTimeout(context.Background(), waitLimit)
		defer scancel()
		if err := b.Stop(sctx); err != nil {
			t.Errorf("stop bot: %v", err)
		}
	}
	if k := e.f.WaitHandshake(t); k != "identify" {
		t.Fatalf("handshake %q, want identify", k)
	}
	e.f.WaitHeartbeat(t)
}

// restart stops the adapter and the bot and starts new ones on the same store.
func (e *e2e) restart(t *testing.T) {
	t.Helper()
	e.stop(t)
	e.start(t)
}

// slash runs /loopbot goal:... and returns the interaction's ID and the run's thread (the
// fake gives a thread started from a message the message's ID).
func (e *e2e) slash(t *testing.T, goal string) (id, thread string) {
	t.Helper()
	id, token := e.f.Interaction()
	e.f.Dispatch(t, "INTERACTION_CREATE", discordfake.SlashPayload(id, token, discordfake.Channel, "", "loopbot", discordfake.GoalOption(goal)))
	return id, "orig-" + token
}

// click presses a button on a message in thread as userID and returns the interaction token.
func (e *e2e) click(t *testing.T, thread, messageID, customID, userID string) string {
	t.Helper()
	id, token := e.f.Interaction()
	e.f.Dispatch(t, "INTERACTION_CREATE", discordfake.ButtonPayload(id, token, thread, discordfake.Channel, messageID, customID, userID))
	return token
}

// pending reports the approvals still pending and the items left in the outbox.
func (e *e2e) pending(t *testing.T) (approvals []*bot.Approval, outbox []bot.OutboxItem) {
	t.Helper()
	err := e.db.View(context.Background(), func(tx bot.Tx) error {
		var err error
		if approvals, err = tx.Approvals(""); err != nil {
			return err
		}
		outbox, err = tx.Outbox()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return approvals, outbox
}

// waitUntil polls cond until it holds, for at most waitLimit. It is for state the fake
// stores after logging a request (messages), which WaitFor's wake-ups can miss.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// receive waits for a value on ch.
func receive[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// gate is a model step that marks "model" in the fake's order log, sends the Discord
// requests made so far on seen, and answers with s only once release is closed: the test
// sees when the model is consulted and decides when the run moves on.
func gate(t *testing.T, f *FakeDiscord, seen chan<- []discordfake.Request, release <-chan struct{}, s llmtest.Step) llmtest.Step {
	// The handler must not outlive the test's server: end the wait before the server closes
	// (cleanups run last registered first, and llmtest's server is registered before).
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	return llmtest.Func(func(llmtest.Request) llmtest.Step {
		f.Mark("model")
		seen <- f.Requests()
		select {
		case <-release:
		case <-done:
		}
		return s
	})
}

// embed is the first embed of a message's payload, or nil.
func embed(m discordfake.Message) map[string]any {
	es, _ := m.Payload["embeds"].([]any)
	if len(es) == 0 {
		return nil
	}
	e, _ := es[0].(map[string]any)
	return e
}

// buttonIDs maps the labels of a message's buttons to their custom_id.
func buttonIDs(m discordfake.Message) map[string]string {
	out := map[string]string{}
	rows, _ := m.Payload["components"].([]any)
	for _, r := range rows {
		row, _ := r.(map[string]any)
		cs, _ := row["components"].([]any)
		for _, c := range cs {
			b, _ := c.(map[string]any)
			label, _ := b["label"].(string)
			id, _ := b["custom_id"].(string)
			out[label] = id
		}
	}
	return out
}

// card finds the message in thread whose embed title satisfies match.
func (e *e2e) card(thread string, match func(title string) bool) (discordfake.Message, bool) {
	for _, m := range e.f.ChannelMessages(thread) {
		if em := embed(m); em != nil {
			if title, _ := em["title"].(string); match(title) {
				return m, true
			}
		}
	}
	return discordfake.Message{}, false
}

// statusCard is the run's status card in thread: the embed titled with the goal.
func (e *e2e) statusCard(thread, goal string) (discordfake.Message, bool) {
	return e.card(thread, func(title string) bool { return title == goal })
}

// answer is the first message of thread whose content contains text.
func (e *e2e) answer(thread, text string) (discordfake.Message, bool) {
	for _, m := range e.f.ChannelMessages(thread) {
		if c, _ := m.Payload["content"].(string); strings.Contains(c, text) {
			return m, true
		}
	}
	return discordfake.Message{}, false
}

func description(m discordfake.Message) string {
	d, _ := embed(m)["description"].(string)
	return d
}

// A goal given with /loopbot is acknowledged before the model hears of it, gets a thread,
// a status card there that is edited in place as the run goes, and the answer.
func TestE2ESlashCommandRun(t *testing.T) {
	seen, release := make(chan []discordfake.Request, 1), make(chan struct{})
	e := newE2E(t, bot.Config{EditInterval: agent.Duration(10 * time.Millisecond)})
	e.llm.Push(gate(t, e.f, seen, release, llmtest.Text("The answer is **42**.")))
	e.start(t)
	const goal = "find the answer"
	id, thread := e.slash(t, goal)

	// When the model is first consulted, Discord has had the deferred response.
	atModel := receive(t, "the model call", seen)
	cb := discordfake.Find(atModel, "POST", "/api/v9/interactions/"+id+"/*/callback")
	if len(cb) != 1 || cb[0].Body["type"] != float64(5) {
		t.Fatalf("Discord requests before the model call:\n%s\nwant the deferred response (type 5) among them", discordfake.Describe(atModel))
	}
	if order := e.f.Order(); slices.Index(order, "callback") < 0 || slices.Index(order, "callback") > slices.Index(order, "model") {
		t.Errorf("order %v, want the callback before the model", order)
	}
	if n := len(e.llm.Requests()); n != 1 {
		t.Errorf("%d model requests while the first is held, want 1", n)
	}

	// The card shows up in the run's thread while the model is still thinking.
	waitUntil(t, "the status card", func() bool { _, ok := e.statusCard(thread, goal); return ok })
	first, _ := e.statusCard(thread, goal)
	if ids := buttonIDs(first); ids["Cancel"] == "" {
		t.Errorf("running card without a Cancel button: %+v", first.Payload)
	}
	close(release)

	waitUntil(t, "the answer and the final card", func() bool {
		m, _ := e.f.Message(first.ID)
		_, answered := e.answer(thread, "The answer is **42**.")
		return answered && strings.Contains(description(m), "**Done**")
	})
	final, _ := e.f.Message(first.ID)
	if final.Edits == 0 || len(buttonIDs(final)) != 0 {
		t.Errorf("final card: %d edits, buttons %v; want edited in place, no buttons", final.Edits, buttonIDs(final))
	}
	cards := 0
	for _, m := range e.f.ChannelMessages(thread) {
		if embed(m) != nil {
			cards++
		}
	}
	if cards != 1 {
		t.Errorf("%d cards in the thread, want the one card edited in place", cards)
	}

	reqs := e.f.Requests()
	if got := discordfake.Find(reqs, "POST", "/api/v9/channels/"+discordfake.Channel+"/messages/"+thread+"/threads"); len(got) != 1 || got[0].Body["name"] != goal {
		t.Errorf("thread starts: %+v, want one named after the goal", got)
	}
	posts := discordfake.Find(reqs, "POST", "/api/v9/channels/"+thread+"/messages")
	edits := discordfake.Find(reqs, "PATCH", "/api/v9/channels/"+thread+"/messages/"+first.ID)
	if len(posts) != 2 || len(edits) == 0 {
		t.Fatalf("in the thread: %d posts (want card and answer) and %d card edits (want some)\n%s", len(posts), len(edits), discordfake.Describe(reqs))
	}
	for _, r := range append(posts, edits...) {
		if r.Auth != "Bot test-token" {
			t.Errorf("%s %s with %q, want the bot token", r.Method, r.Path, r.Auth)
		}
	}
	// The card goes out before the answer, and nothing reaches the run's thread through the
	// interaction's webhook.
	if p := posts[0]; embed(discordfake.Message{Payload: p.Body}) == nil {
		t.Errorf("first post in the thread is not the card: %+v", p.Body)
	}
	if fu := discordfake.Find(reqs, "POST", "/api/v9/webhooks/*/*"); len(fu) != 0 {
		t.Errorf("follow-ups %+v, want none for a run that went well", fu)
	}
	if n := len(e.llm.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1", n)
	}
}

// startApproval runs a goal whose first step calls the deploy tool and waits for the
// approval card; it returns the thread and the card.
func startApproval(t *testing.T, e *e2e) (thread string, card discordfake.Message) {
	t.Helper()
	_, thread = e.slash(t, "deploy the site")
	waitUntil(t, "the approval card", func() bool {
		m, ok := e.card(thread, func(title string) bool { return title == "Approve deploy?" })
		return ok && buttonIDs(m)["Approve once"] != ""
	})
	card, _ = e.card(thread, func(title string) bool { return title == "Approve deploy?" })
	return thread, card
}

// approvalScript is the model of the approval tests: deploy, then say it is done.
func approvalScript() []llmtest.Step {
	return []llmtest.Step{
		llmtest.ToolCalls(llmtest.Call("deploy", `{"version":"1.2"}`)),
		llmtest.Text("Deployed v1.2."),
	}
}

// Approve, as rendered on the card, runs the tool once and settles the card, also when the
// bot was restarted between the card and the click.
func TestE2EApproveByButton(t *testing.T) {
	for _, tt := range []struct {
		name    string
		restart bool
	}{
		{"same process", false},
		{"after a restart", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newE2E(t, bot.Config{EditInterval: agent.Duration(10 * time.Millisecond)}, approvalScript()...)
			e.start(t)
			thread, card := startApproval(t, e)
			approve := buttonIDs(card)["Approve once"]
			if e.tool.calls.Load() != 0 {
				t.Fatal("the tool ran before the approval")
			}
			if tt.restart {
				e.restart(t)
			}

			token := e.click(t, thread, card.ID, approve, discordfake.UserID)
			waitUntil(t, "the answer and the decided card", func() bool {
				m, _ := e.f.Message(card.ID)
				title, _ := embed(m)["title"].(string)
				_, answered := e.answer(thread, "Deployed v1.2.")
				return answered && title == "deploy: approved"
			})
			decided, _ := e.f.Message(card.ID)
			if len(buttonIDs(decided)) != 0 || !strings.Contains(description(decided), "Approved by user-"+discordfake.UserID) {
				t.Errorf("decided card %+v, want who approved and no buttons", decided.Payload)
			}
			reqs := e.f.Requests()
			if cb := discordfake.Find(reqs, "POST", "/api/v9/interactions/*/"+token+"/callback"); len(cb) != 1 || cb[0].Body["type"] != float64(6) {
				t.Errorf("click acknowledged with %+v, want one deferred update (type 6)", cb)
			}
			if edits := discordfake.Find(reqs, "PATCH", "/api/v9/channels/"+thread+"/messages/"+card.ID); len(edits) == 0 {
				t.Error("the approval card was not edited in place")
			}

			// The same click again (a second press) changes nothing either.
			again := e.click(t, thread, card.ID, approve, discordfake.UserID)
			fu := e.f.WaitFor(t, "the notice of the second click", func(r []discordfake.Request) bool {
				return len(discordfake.Find(r, "POST", "/api/v9/webhooks/"+discordfake.AppID+"/"+again)) == 1
			})
			if n := discordfake.Find(fu, "POST", "/api/v9/webhooks/"+discordfake.AppID+"/"+again)[0]; !strings.HasPrefix(fmt.Sprint(n.Body["content"]), "Already approved") || n.Body["flags"] != float64(64) {
				t.Errorf("second click told %+v, want an ephemeral 'Already approved'", n.Body)
			}
			if n := e.tool.calls.Load(); n != 1 {
				t.Errorf("the tool ran %d times, want once", n)
			}
			if n := len(e.llm.Requests()); n != 2 {
				t.Errorf("%d model requests, want 2", n)
			}
		})
	}
}

// A click by someone who may not decide gets an ephemeral notice and changes nothing: the
// approval still waits, no card is edited, the tool does not run; the requester's click
// afterwards still works.
func TestE2EClickByOtherUserChangesNothing(t *testing.T) {
	e := newE2E(t, bot.Config{EditInterval: agent.Duration(10 * time.Millisecond)}, approvalScript()...)
	e.start(t)
	thread, card := startApproval(t, e)
	// Let the outbox settle, so that anything sent after the click was caused by it.
	waitUntil(t, "an empty outbox", func() bool { _, out := e.pending(t); return len(out) == 0 })
	card, _ = e.f.Message(card.ID)
	before := e.f.Requests()

	const stranger = "900000000000000555"
	token := e.click(t, thread, card.ID, buttonIDs(card)["Approve once"], stranger)
	reqs := e.f.WaitFor(t, "the ephemeral notice", func(r []discordfake.Request) bool {
		return len(discordfake.Find(r, "POST", "/api/v9/webhooks/"+discordfake.AppID+"/"+token)) == 1
	})
	n := discordfake.Find(reqs, "POST", "/api/v9/webhooks/"+discordfake.AppID+"/"+token)[0]
	if !strings.HasPrefix(n.Body["content"].(string), "You are not allowed to decide on this request. Only ") || n.Body["flags"] != float64(64) {
		t.Errorf("notice %+v, want the refusal with flags 64 (ephemeral)", n.Body)
	}
	// Only the acknowledgement and the notice went out.
	if after := reqs[len(before):]; len(after) != 2 {
		t.Errorf("after the click:\n%s\nwant only the callback and the notice", discordfake.Describe(after))
	}
	aps, out := e.pending(t)
	if len(aps) != 1 || aps[0].Status != bot.ApprovalPending || len(out) != 0 {
		t.Errorf("after the click: approvals %+v, outbox %+v; want the approval pending and nothing to send", aps, out)
	}
	if m, _ := e.f.Message(card.ID); m.Edits != card.Edits || !equalJSON(m.Payload, card.Payload) {
		t.Errorf("the card changed: %+v", m.Payload)
	}
	if e.tool.calls.Load() != 0 || len(e.llm.Requests()) != 1 {
		t.Errorf("tool calls %d, model requests %d; want 0 and 1", e.tool.calls.Load(), len(e.llm.Requests()))
	}

	e.click(t, thread, card.ID, buttonIDs(card)["Approve once"], discordfake.UserID)
	waitUntil(t, "the answer", func() bool { _, ok := e.answer(thread, "Deployed v1.2."); return ok })
	if n := e.tool.calls.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
}

func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return errors.Join(err1, err2) == nil && string(x) == string(y)
}

// A 429 on the card's edit holds the channel for its retry_after; the card still reaches
// its final state, with one retry rather than a storm of edits.
func TestE2ECardEditRateLimited(t *testing.T) {
	seen, release := make(chan []discordfake.Request, 1), make(chan struct{})
	e := newE2E(t, bot.Config{EditInterval: agent.Duration(10 * time.Millisecond)})
	e.llm.Push(gate(t, e.f, seen, release, llmtest.Text("All done.")))
	e.start(t)
	const goal = "a job that ends quickly"
	_, thread := e.slash(t, goal)
	receive(t, "the model call", seen)
	waitUntil(t, "the status card", func() bool { _, ok := e.statusCard(thread, goal); return ok })
	card, _ := e.statusCard(thread, goal)

	const retryAfter = time.Second
	route := "/api/v9/channels/" + thread + "/messages/" + card.ID
	e.f.Fail("PATCH", route, 429, `{"message":"You are being rate limited.","retry_after":1.0,"global":false}`,
		map[string][]string{"Retry-After": {"1"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset-After": {"1.000"}})
	close(release)

	waitUntil(t, "the final card and the answer", func() bool {
		m, _ := e.f.Message(card.ID)
		_, answered := e.answer(thread, "All done.")
		return answered && strings.Contains(description(m), "**Done**")
	})
	reqs := e.f.Requests()
	edits := discordfake.Find(reqs, "PATCH", route)
	if len(edits) < 2 {
		t.Fatalf("%d card edits, want the limited one and its retry:\n%s", len(edits), discordfake.Describe(reqs))
	}
	// The bot's pacing key is the parent channel: after the 429, nothing went to the thread
	// until retry_after had passed (a lower bound: time only moves forward).
	// The limited edit is the one answered 429: an edit queued earlier may have reached the
	// card before the failure was set up.
	limited := slices.IndexFunc(reqs, func(r discordfake.Request) bool {
		return r.Method == "PATCH" && r.Path == route && r.Status == 429
	})
	if limited < 0 {
		t.Fatalf("no card edit was answered 429:\n%s", discordfake.Describe(reqs))
	}
	for _, r := range reqs[limited+1:] {
		if strings.HasPrefix(r.Path, "/api/v9/channels/"+thread+"/") {
			if gap := r.At.Sub(reqs[limited].At); gap < retryAfter {
				t.Errorf("%s %s came %s after the 429, want at least %s", r.Method, r.Path, gap, retryAfter)
			}
			break
		}
	}
	// No storm: the limited edit, one retry to the final state, and at most one edit of an
	// intermediate state that was already queued.
	if len(edits) > 3 {
		t.Errorf("%d card edits, want at most 3:\n%s", len(edits), discordfake.Describe(reqs))
	}
	final, _ := e.f.Message(card.ID)
	if len(buttonIDs(final)) != 0 {
		t.Errorf("final card keeps its buttons: %+v", final.Payload)
	}
}

// A reply in the run's thread while the run is in a tool call is acknowledged in the thread
// as noted, reaches the model's next request as the person's note, and starts no second run.
func TestE2EReplySteersAWorkingRun(t *testing.T) {
	held := agenttest.NewHeld(t, "migrate", "migrated half the tables")
	e := newE2E(t, bot.Config{EditInterval: agent.Duration(10 * time.Millisecond)},
		llmtest.ToolCalls(llmtest.Call("migrate", `{}`)), llmtest.Text("Migrated on staging, as asked."))
	e.more = []agent.Tool{held}
	e.start(t)
	const goal, thread = "migrate the database", "1200"
	e.f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload(thread, discordfake.Channel, "<@"+discordfake.BotID+"> "+goal, discordfake.BotID))
	receive(t, "the tool call", held.Started)

	const note = "use the staging database instead"
	e.f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload("1201", thread, note))
	waitUntil(t, "the thread's acknowledgement", func() bool { _, ok := e.answer(thread, "Noted"); return ok })
	held.Free()
	waitUntil(t, "the answer", func() bool { _, ok := e.answer(thread, "Migrated on staging"); return ok })

	reqs := e.llm.Requests()
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
	if err := e.db.View(context.Background(), func(tx bot.Tx) (err error) {
		runs, err = tx.Runs(bot.RunFilter{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Errorf("%d runs in the store, want the one the reply steered", len(runs))
	}
	cards := 0
	for _, m := range e.f.ChannelMessages(thread) {
		if embed(m) != nil {
			cards++
		}
	}
	if cards != 1 {
		t.Errorf("%d cards in the thread, want the one status card", cards)
	}
}
