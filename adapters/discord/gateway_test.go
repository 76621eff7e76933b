package discord

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/adapters/discord/discordfake"
	"github.com/loopbot/loopbot/bot"
)

// recorder is a Handler that records events in the fake's order log and answers with a
// scripted result per event kind.
type recorder struct {
	f       *FakeDiscord
	mu      sync.Mutex
	results map[bot.EventKind]bot.Result
	err     error
	events  chan bot.Event
}

func newRecorder(f *FakeDiscord) *recorder {
	return &recorder{f: f, results: map[bot.EventKind]bot.Result{}, events: make(chan bot.Event, 16)}
}

func (r *recorder) Handle(ctx context.Context, ev bot.Event) (bot.Result, error) {
	r.f.Mark("handle")
	r.events <- ev
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.results[ev.Kind], r.err
}

func (r *recorder) next(t testing.TB) bot.Event {
	t.Helper()
	select {
	case ev := <-r.events:
		if err := ev.Validate(); err != nil {
			t.Errorf("event does not validate: %v", err)
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event handled")
		return bot.Event{}
	}
}

func testConfig(f *FakeDiscord) Config {
	return Config{Token: "test-token", ApplicationID: discordfake.AppID, APIURL: f.URL(), MessageContent: true}
}

// startGateway runs an adapter in gateway mode against f until the test ends.
func startGateway(t *testing.T, f *FakeDiscord, h bot.Handler) *Adapter {
	t.Helper()
	a, err := New(testConfig(f), WithClock(f.Now))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	if k := f.WaitHandshake(t); k != "identify" {
		t.Fatalf("first handshake %q, want identify", k)
	}
	f.WaitHeartbeat(t)
	return a
}

// startRun runs /loopbot in the fake's channel and returns the event the handler got.
func startRun(t *testing.T, f *FakeDiscord, rec *recorder, goal string) bot.Event {
	t.Helper()
	id, token := f.Interaction()
	f.Dispatch(t, "INTERACTION_CREATE", discordfake.SlashPayload(id, token, discordfake.Channel, "", "loopbot", discordfake.GoalOption(goal)))
	return rec.next(t)
}

func TestGatewaySlashCommand(t *testing.T) {
	f := NewFakeDiscord(t)
	rec := newRecorder(f)
	startGateway(t, f, rec)

	reqs := f.Requests()
	cmds := discordfake.Find(reqs, "PUT", "/api/v9/applications/"+discordfake.AppID+"/commands")
	if len(cmds) != 1 || len(cmds[0].List) != len(commands()) {
		t.Fatalf("commands not registered globally once with all %d commands: %+v", len(commands()), cmds)
	}

	id, token := f.Interaction()
	f.Dispatch(t, "INTERACTION_CREATE", discordfake.SlashPayload(id, token, discordfake.Channel, "", "loopbot", discordfake.GoalOption("summarise @everyone's issues")))
	ev := rec.next(t)

	if got := f.Order(); len(got) != 2 || got[0] != "callback" || got[1] != "handle" {
		t.Fatalf("order %v, want the deferred response before Handle", got)
	}
	reqs = f.Requests()
	cb := discordfake.Find(reqs, "POST", "/api/v9/interactions/"+id+"/"+token+"/callback")
	if len(cb) != 1 || cb[0].Body["type"] != float64(5) {
		t.Fatalf("callback %+v, want one type 5", cb)
	}
	orig := "orig-" + token
	if got := discordfake.Find(reqs, "POST", "/api/v9/channels/"+discordfake.Channel+"/messages/"+orig+"/threads"); len(got) != 1 || got[0].Body["name"] != "summarise @everyone's issues" {
		t.Fatalf("thread not started from the response message: %+v", got)
	}
	want := bot.Event{
		Kind: bot.EventCommand, Command: bot.CommandStart, ID: id,
		Thread: bot.ThreadRef{Platform: "discord", Workspace: discordfake.GuildID, Channel: discordfake.Channel, Thread: orig},
		User:   bot.User{ID: discordfake.UserID, Name: "Alice"},
		Text:   "summarise @everyone's issues",
	}
	ev.At = time.Time{}
	emptyHistory(t, &ev)
	if ev != want {
		t.Errorf("event\n got %+v\nwant %+v", ev, want)
	}
	// The goal shown in the channel cannot ping.
	m, _ := f.Message(orig)
	if c, _ := m.Payload["content"].(string); c != "**Alice** asked: summarise @\u200beveryone's issues" {
		t.Errorf("goal message %q", c)
	}
}

func TestGatewayStatusIsEphemeral(t *testing.T) {
	f := NewFakeDiscord(t)
	rec := newRecorder(f)
	rec.results[bot.EventCommand] = bot.Result{Notice: "No runs in this thread yet."}
	startGateway(t, f, rec)
	id, token := f.Interaction()
	f.Dispatch(t, "INTERACTION_CREATE", discordfake.SlashPayload(id, token, "700", discordfake.Channel, "loopbot-status"))
	ev := rec.next(t)
	if ev.Command != bot.CommandStatus || ev.Thread.Thread != "700" || ev.Thread.Channel != discordfake.Channel {
		t.Errorf("event %+v", ev)
	}
	reqs := f.WaitFor(t, "status answer", func(r []discordfake.Request) bool {
		return len(discordfake.Find(r, "PATCH", "/api/v9/webhooks/"+discordfake.AppID+"/"+token+"/messages/@original")) == 1
	})
	cb := discordfake.Find(reqs, "POST", "/api/v9/interactions/*/*/callback")[0]
	if data, _ := cb.Body["data"].(map[string]any); cb.Body["type"] != float64(5) || data["flags"] != float64(64) {
		t.Errorf("status deferral %+v, want type 5 with flags 64", cb.Body)
	}
	edit := discordfake.Find(reqs, "PATCH", "/api/v9/webhooks/*/*/messages/@original")[0]
	if edit.Body["content"] != "No runs in this thread yet." {
		t.Errorf("status answer %+v", edit.Body)
	}
	if len(discordfake.Find(reqs, "POST", "/api/v9/channels/*/messages/*/threads")) != 0 {
		t.Error("status opened a thread")
	}
}

func TestGatewayButtonNotice(t *testing.T) {
	f := NewFakeDiscord(t)
	rec := newRecorder(f)
	rec.results[bot.EventAction] = bot.Result{Notice: "Only the person who started this run or an approver can do that."}
	startGateway(t, f, rec)

	id, token := f.Interaction()
	f.Dispatch(t, "INTERACTION_CREATE", discordfake.ButtonPayload(id, token, "700", discordfake.Channel, "701", "opaque-approve-id", "555"))
	ev := rec.next(t)
	want := bot.Event{
		Kind: bot.EventAction, ID: id, ActionID: "opaque-approve-id",
		Thread: bot.ThreadRef{Platform: "discord", Workspace: discordfake.GuildID, Channel: discordfake.Channel, Thread: "700"},
		User:   bot.User{ID: "555", Name: "user-555"},
	}
	ev.At = time.Time{}
	if ev != want {
		t.Errorf("event\n got %+v\nwant %+v", ev, want)
	}
	reqs := f.WaitFor(t, "ephemeral follow-up", func(r []discordfake.Request) bool {
		return len(discordfake.Find(r, "POST", "/api/v9/webhooks/"+discordfake.AppID+"/"+token)) == 1
	})
	if got := f.Order(); got[0] != "callback" || got[1] != "handle" {
		t.Errorf("order %v, want the deferred response before Handle", got)
	}
	if cb := discordfake.Find(reqs, "POST", "/api/v9/interactions/*/*/callback"); cb[0].Body["type"] != float64(6) {
		t.Errorf("button deferral %+v, want type 6", cb[0].Body)
	}
	fu := discordfake.Find(reqs, "POST", "/api/v9/webhooks/*/*")[0]
	if fu.Body["flags"] != float64(64) || fu.Body["content"] != rec.results[bot.EventAction].Notice {
		t.Errorf("follow-up %+v, want the notice with flags 64", fu.Body)
	}
}

func TestGatewayHandleErrorTellsUser(t *testing.T) {
	f := NewFakeDiscord(t)
	rec := newRecorder(f)
	rec.err = errors.New("store is down")
	startGateway(t, f, rec)
	id, token := f.Interaction()
	f.Dispatch(t, "INTERACTION_CREATE", discordfake.ButtonPayload(id, token, "700", discordfake.Channel, "701", "x", "555"))
	rec.next(t)
	reqs := f.WaitFor(t, "follow-up", func(r []discordfake.Request) bool {
		return len(discordfake.Find(r, "POST", "/api/v9/webhooks/*/*")) == 1
	})
	if fu := discordfake.Find(reqs, "POST", "/api/v9/webhooks/*/*")[0]; fu.Body["content"] != noticeHandleFailed {
		t.Errorf("follow-up %+v", fu.Body)
	}
}

// A mention the bot could not take in (its store refused the write) is answered in the
// thread with a safe notice that mentions the person, not the error.
func TestGatewayMentionHandleErrorTellsUser(t *testing.T) {
	f := NewFakeDiscord(t)
	rec := newRecorder(f)
	rec.err = errors.New("store update: no space left on device")
	startGateway(t, f, rec)
	f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload("1200", discordfake.Channel, "<@"+discordfake.BotID+"> tidy the docs", discordfake.BotID))
	rec.next(t)
	reqs := f.WaitFor(t, "notice in the thread", func(r []discordfake.Request) bool {
		return len(discordfake.Find(r, "POST", "/api/v9/channels/1200/messages")) == 1
	})
	content, _ := discordfake.Find(reqs, "POST", "/api/v9/channels/1200/messages")[0].Body["content"].(string)
	if want := "<@" + discordfake.UserID + "> " + noticeHandleFailed; content != want {
		t.Errorf("notice %q, want %q", content, want)
	}
}

// A run outlives its interaction token: the card is posted and edited with the bot token on
// the thread's channel routes, never through the interaction webhook.
func TestLongRunUsesBotTokenRoutes(t *testing.T) {
	f := NewFakeDiscord(t)
	rec := newRecorder(f)
	a := startGateway(t, f, rec)
	ev := startRun(t, f, rec, "a long job")
	ctx := context.Background()

	before := len(f.Requests())
	f.Advance(16 * time.Minute) // the interaction token is dead now
	card := bot.Message{Kind: bot.KindStatus, Title: "a long job", Text: "Working", Buttons: []bot.Button{{ID: "cancel-1", Label: "Cancel", Style: bot.StyleDanger}}}
	ref, err := a.Post(ctx, ev.Thread, card)
	if err != nil {
		t.Fatal(err)
	}
	card.Text, card.Buttons = "Done", nil
	if err := a.Update(ctx, ref, card); err != nil {
		t.Fatal(err)
	}
	if err := a.Notify(ctx, ev.Thread, ev.User.ID, "Cancelling the run."); err != nil {
		t.Fatal(err)
	}
	after := f.Requests()[before:]
	th := ev.Thread.Thread
	for _, r := range after {
		if r.Auth != "Bot test-token" {
			t.Errorf("%s %s without the bot token", r.Method, r.Path)
		}
		if len(discordfake.Find([]discordfake.Request{r}, r.Method, "/api/v9/webhooks/*/*")) > 0 || len(discordfake.Find([]discordfake.Request{r}, r.Method, "/api/v9/webhooks/*/*/messages/*")) > 0 {
			t.Errorf("%s %s: an interaction webhook route after the token died", r.Method, r.Path)
		}
	}
	if len(discordfake.Find(after, "POST", "/api/v9/channels/"+th+"/messages")) != 2 || len(discordfake.Find(after, "PATCH", "/api/v9/channels/"+th+"/messages/"+ref.ID)) != 1 {
		t.Errorf("want two posts and one edit in the thread; got\n%s", discordfake.Describe(after))
	}
	m, _ := f.Message(ref.ID)
	if m.Edits != 1 || len(m.Payload["components"].([]any)) != 0 {
		t.Errorf("card after edit: %+v", m)
	}
	// The stale notice became a message in the thread that pings only that user.
	notice := discordfake.Find(after, "POST", "/api/v9/channels/"+th+"/messages")[1].Body
	am := notice["allowed_mentions"].(map[string]any)
	if notice["content"] != "<@"+discordfake.UserID+"> Cancelling the run." || len(am["parse"].([]any)) != 0 || am["users"].([]any)[0] != discordfake.UserID {
		t.Errorf("notice %+v", notice)
	}
}

func TestNotifyFreshTokenIsEphemeral(t *testing.T) {
	f := NewFakeDiscord(t)
	rec := newRecorder(f)
	a := startGateway(t, f, rec)
	ev := startRun(t, f, rec, "job")
	f.Advance(5 * time.Minute)
	if err := a.Notify(context.Background(), ev.Thread, ev.User.ID, "Only you can see this."); err != nil {
		t.Fatal(err)
	}
	fu := discordfake.Find(f.Requests(), "POST", "/api/v9/webhooks/*/*")
	if len(fu) != 1 || fu[0].Body["flags"] != float64(64) {
		t.Errorf("follow-ups %+v, want one ephemeral", fu)
	}
}

func TestGatewayResume(t *testing.T) {
	f := NewFakeDiscord(t)
	rec := newRecorder(f)
	startGateway(t, f, rec)
	if err := f.DropGateway(); err != nil {
		t.Fatal(err)
	}
	if k := f.WaitHandshake(t); k != "resume" {
		t.Fatalf("after a drop: %q, want resume", k)
	}
	f.WaitHeartbeat(t)
	ev := startRun(t, f, rec, "after the drop")
	if ev.Text != "after the drop" {
		t.Errorf("event after resume %+v", ev)
	}
}

func TestGatewayMentionAndReply(t *testing.T) {
	f := NewFakeDiscord(t)
	rec := newRecorder(f)
	startGateway(t, f, rec)

	f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload("1200", discordfake.Channel, "<@"+discordfake.BotID+"> tidy the docs", discordfake.BotID))
	ev := rec.next(t)
	want := bot.Event{
		Kind: bot.EventMention, ID: "1200", Text: "tidy the docs",
		Thread: bot.ThreadRef{Platform: "discord", Workspace: discordfake.GuildID, Channel: discordfake.Channel, Thread: "1200"},
		User:   bot.User{ID: discordfake.UserID, Name: "alice"},
	}
	ev.At = time.Time{}
	emptyHistory(t, &ev)
	if ev != want {
		t.Errorf("mention\n got %+v\nwant %+v", ev, want)
	}
	if got := discordfake.Find(f.Requests(), "POST", "/api/v9/channels/"+discordfake.Channel+"/messages/1200/threads"); len(got) != 1 {
		t.Errorf("thread not started from the mention")
	}

	// A reply in the bot's thread needs no mention.
	f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload("1201", "1200", "yes, go ahead"))
	ev = rec.next(t)
	if ev.Kind != bot.EventReply || ev.Thread != want.Thread || ev.Text != "yes, go ahead" {
		t.Errorf("reply %+v", ev)
	}

	// A redelivered mention finds its thread again.
	f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload("1200", discordfake.Channel, "<@"+discordfake.BotID+"> tidy the docs", discordfake.BotID))
	if ev = rec.next(t); ev.Thread != want.Thread {
		t.Errorf("redelivered mention in %+v", ev.Thread)
	}

	// Someone else's thread is looked up once and left alone unless the bot is mentioned.
	f.AddChannel(map[string]any{"id": "1300", "type": 11, "parent_id": discordfake.Channel, "owner_id": discordfake.UserID})
	f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload("1301", "1300", "<@!"+discordfake.BotID+"> help here", discordfake.BotID))
	ev = rec.next(t)
	if ev.ID != "1301" || ev.Kind != bot.EventMention || ev.Thread.Thread != "1300" || ev.Text != "help here" {
		t.Errorf("mention in a user's thread %+v", ev)
	}
	f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload("1302", "1300", "chatter"))
	f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload("1303", "1300", "<@"+discordfake.BotID+"> and this", discordfake.BotID))
	if ev = rec.next(t); ev.ID != "1303" {
		t.Errorf("handled %+v, want only the mention", ev)
	}
	if got := discordfake.Find(f.Requests(), "GET", "/api/v9/channels/1300"); len(got) != 1 {
		t.Errorf("thread looked up %d times, want once (cached)", len(got))
	}
}

// A 429 on opening a run's thread (Discord limits thread creation tightly) does not lose the
// goal: the adapter waits the retry_after and opens it, for a command and for a mention, and
// the user is told nothing went wrong.
func TestGatewayThreadStartRateLimited(t *testing.T) {
	const wait = 300 * time.Millisecond
	tests := []struct {
		name   string
		send   func(t *testing.T, f *FakeDiscord) (thread string)
		create string // the thread-start route
	}{
		{"command", func(t *testing.T, f *FakeDiscord) string {
			id, token := f.Interaction()
			f.Dispatch(t, "INTERACTION_CREATE", discordfake.SlashPayload(id, token, discordfake.Channel, "", "loopbot", discordfake.GoalOption("open a thread")))
			return "orig-" + token
		}, "/api/v9/channels/" + discordfake.Channel + "/messages/*/threads"},
		{"mention", func(t *testing.T, f *FakeDiscord) string {
			f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload("1400", discordfake.Channel, "<@"+discordfake.BotID+"> open a thread", discordfake.BotID))
			return "1400"
		}, "/api/v9/channels/" + discordfake.Channel + "/messages/1400/threads"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFakeDiscord(t)
			rec := newRecorder(f)
			startGateway(t, f, rec)
			f.RateLimit("POST", tt.create, 1, wait)
			thread := tt.send(t, f)
			ev := rec.next(t)
			if ev.Thread.Thread != thread || ev.Text != "open a thread" {
				t.Errorf("event %+v, want the goal in thread %s", ev, thread)
			}
			starts := discordfake.Find(f.Requests(), "POST", tt.create)
			if len(starts) != 2 || starts[0].Status != 429 || starts[1].Status != 201 {
				t.Fatalf("thread starts:\n%s\nwant a 429, then the thread", discordfake.Describe(starts))
			}
			if gap := starts[1].At.Sub(starts[0].At); gap < wait {
				t.Errorf("tried again %s after the 429, want at least its retry_after %s", gap, wait)
			}
			if fu := discordfake.Find(f.Requests(), "POST", "/api/v9/webhooks/*/*"); len(fu) != 0 {
				t.Errorf("the user was told %+v, want nothing", fu[0].Body)
			}
		})
	}
}
