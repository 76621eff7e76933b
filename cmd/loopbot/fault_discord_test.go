package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/adapters/discord/discordfake"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// The Discord fault tests run the real binary in Discord mode against discordfake (REST and
// gateway) and break Discord as the network or Discord itself would: the gateway socket cut
// mid-run, 429s with retry_after on the routes the bot shows its progress through, and
// forged or oversized requests to the HTTP interactions endpoint.

// discordToken is the daemon's bot token; it must never reach a chat message or a log.
const discordToken = "MTI5OTk5OTk5OTk5OTk5OTk5.canary.discord-bot-token-3c9e"

// discordWait bounds every wait of these tests on the fake.
const discordWait = 30 * time.Second

// newDiscordFake starts a fake Discord that stops, and reports what it found wrong in what
// the daemon sent, when the test ends.
func newDiscordFake(t *testing.T) *discordfake.Server {
	t.Helper()
	f, err := discordfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Close()
		if err := f.Err(); err != nil {
			t.Errorf("fake discord: %v", err)
		}
	})
	return f
}

// discordSetup is a fault setup with Discord configured against f (and the bot's pacing
// short, so that the tests wait on Discord's retry_after rather than on the bot's own
// interval); extra goes into the [discord] section.
func discordSetup(t *testing.T, model *llmtest.Server, f *discordfake.Server, extra string) faultSetup {
	t.Helper()
	s := newFaultSetup(t, model, fmt.Sprintf("[bot]\nedit_interval = \"50ms\"\n[discord]\napplication_id = %q\napi_url = %q\n%s",
		discordfake.AppID, f.URL(), extra))
	s.env = append(s.env, "DISCORD_BOT_TOKEN="+discordToken)
	return s
}

// waitDiscord waits until cond holds for the fake, or fails the test with the fake's log and
// the daemon's.
func waitDiscord(t *testing.T, f *discordfake.Server, logs *logBuffer, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), discordWait)
	defer cancel()
	if err := f.WaitUntil(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v\nrequests:\n%s\nlogs:\n%s", what, err, discordfake.Describe(f.Requests()), logs)
	}
}

// waitDiscordGateway waits for the daemon's next gateway connection to be up and returns
// whether it identified or resumed.
func waitDiscordGateway(t *testing.T, f *discordfake.Server, logs *logBuffer) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), discordWait)
	defer cancel()
	kind, err := f.WaitHandshake(ctx)
	if err == nil {
		err = f.WaitHeartbeat(ctx)
	}
	if err != nil {
		t.Fatalf("gateway: %v\nlogs:\n%s", err, logs)
	}
	return kind
}

// discordSlash runs /loopbot goal in the fake's channel over the gateway; it returns the
// interaction's payload and the run's thread (the thread started from the interaction's
// response message has that message's ID).
func discordSlash(t *testing.T, f *discordfake.Server, goal string) (payload map[string]any, thread string) {
	t.Helper()
	id, token := f.Interaction()
	payload = discordfake.SlashPayload(id, token, discordfake.Channel, "", "loopbot", discordfake.GoalOption(goal))
	if err := f.Dispatch("INTERACTION_CREATE", payload); err != nil {
		t.Fatal(err)
	}
	return payload, "orig-" + token
}

// discordGoalOf finds which of goals a model request works on.
func discordGoalOf(r llmtest.Request, goals ...string) string {
	for _, m := range r.Messages {
		for _, g := range goals {
			if m.Role == "user" && strings.Contains(m.Content, g) {
				return g
			}
		}
	}
	return ""
}

// discordView is what a thread of the fake shows: its cards (messages with an embed) and
// the content of its other messages.
type discordView struct {
	cards []map[string]any // the embeds
	texts []string
}

// discordThread reads a thread of the fake.
func discordThread(f *discordfake.Server, thread string) discordView {
	var v discordView
	for _, m := range f.ChannelMessages(thread) {
		if es, _ := m.Payload["embeds"].([]any); len(es) > 0 {
			e, _ := es[0].(map[string]any)
			v.cards = append(v.cards, e)
			continue
		}
		c, _ := m.Payload["content"].(string)
		v.texts = append(v.texts, c)
	}
	return v
}

// done reports whether the thread's card says Done and a message contains answer.
func (v discordView) done(answer string) bool {
	if len(v.cards) == 0 {
		return false
	}
	d, _ := v.cards[0]["description"].(string)
	return strings.Contains(d, "**Done**") && strings.Contains(strings.Join(v.texts, "\n"), answer)
}

// discordOnce fails the test unless the thread shows exactly one card and each of its texts
// once, with the answer among them.
func discordOnce(t *testing.T, f *discordfake.Server, thread, answer string) {
	t.Helper()
	v := discordThread(f, thread)
	if len(v.cards) != 1 {
		t.Errorf("thread %s shows %d cards, want the one status card", thread, len(v.cards))
	}
	seen := map[string]int{}
	for _, s := range v.texts {
		seen[s]++
		if seen[s] == 2 {
			t.Errorf("thread %s shows this twice: %.120q", thread, s)
		}
	}
	if n := strings.Count(strings.Join(v.texts, "\n"), answer); n != 1 {
		t.Errorf("thread %s shows the answer %q %d times, want once; texts: %q", thread, answer, n, v.texts)
	}
}

// TestFaultDiscordGatewayDropped cuts the gateway socket while a /loopbot run waits on the
// model, with a mention sent just before the cut and a /loopbot command sent while the
// daemon is away; after the resume the fake delivers the first two again, as Discord's
// at-least-once delivery may. Every run completes once, in its own thread, and nothing is
// answered or posted twice.
func TestFaultDiscordGatewayDropped(t *testing.T) {
	bin := loopbotBinary(t)
	f := newDiscordFake(t)
	const (
		goalA = "summarise the gateway logs"       // running when the socket drops
		goalB = "list the open incidents"          // a mention just before the drop
		goalC = "draft the postmortem for the cut" // a command while the daemon is away
	)
	asked, release, end := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var askedOnce sync.Once
	model := llmtest.NewTest(t)
	// The held model call must end before the model's server closes (cleanups run last
	// registered first).
	t.Cleanup(func() { close(end) })
	model.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		g := discordGoalOf(r, goalA, goalB, goalC)
		if g == goalA {
			askedOnce.Do(func() { close(asked) })
			select {
			case <-release:
			case <-end:
			}
		}
		return llmtest.Text("Finished: " + g + ".")
	}))
	s := discordSetup(t, model, f, "message_content = true\n")
	logs := newLogBuffer()

	p := startLoopbot(t, bin, s.config, s.env, logs)
	if kind := waitDiscordGateway(t, f, logs); kind != "identify" {
		t.Fatalf("first gateway handshake %q, want identify", kind)
	}
	slashA, threadA := discordSlash(t, f, goalA)
	select {
	case <-asked:
	case <-time.After(discordWait):
		t.Fatalf("the model was not asked about %q; logs:\n%s", goalA, logs)
	}
	waitDiscord(t, f, logs, "run A's status card", func() bool { return len(discordThread(f, threadA).cards) == 1 })

	// A mention, then the cut right behind it: the mention may or may not have reached the
	// daemon before the socket went.
	const mentionID = "1100000000000000001"
	mention := discordfake.MessagePayload(mentionID, discordfake.Channel, "<@"+discordfake.BotID+"> "+goalB, discordfake.BotID)
	if err := f.Dispatch("MESSAGE_CREATE", mention); err != nil {
		t.Fatal(err)
	}
	if err := f.DropGateway(); err != nil {
		t.Fatal(err)
	}
	away := !f.Connected()
	_, threadC := discordSlash(t, f, goalC)
	t.Logf("command C dispatched while the daemon was away: %v", away)

	if kind := waitDiscordGateway(t, f, logs); kind != "resume" {
		t.Fatalf("after the drop the daemon's gateway handshake was %q, want resume (it holds a session)", kind)
	}
	// Discord may deliver an event again; the daemon must not act on it twice.
	if err := f.Dispatch("INTERACTION_CREATE", slashA); err != nil {
		t.Fatal(err)
	}
	if err := f.Dispatch("MESSAGE_CREATE", mention); err != nil {
		t.Fatal(err)
	}
	// Both reached the daemon (the mention twice in all, from the replay or before the cut,
	// and again) before A's run goes on.
	tokenA := slashA["token"].(string)
	threadB := mentionID
	waitDiscord(t, f, logs, "the redeliveries", func() bool {
		reqs := f.Requests()
		return len(discordfake.Find(reqs, "POST", "/api/v9/interactions/*/"+tokenA+"/callback")) == 2 &&
			len(discordfake.Find(reqs, "POST", "/api/v9/channels/"+discordfake.Channel+"/messages/"+threadB+"/threads")) == 2
	})
	close(release)

	answers := map[string]string{threadA: "Finished: " + goalA + ".", threadB: "Finished: " + goalB + ".", threadC: "Finished: " + goalC + "."}
	waitDiscord(t, f, logs, "the three answers and final cards", func() bool {
		for th, answer := range answers {
			if !discordThread(f, th).done(answer) {
				return false
			}
		}
		return true
	})
	p.terminate(25 * time.Second)

	for th, answer := range answers {
		discordOnce(t, f, th, answer)
	}
	reqs := f.Requests()
	// A's redelivery was refused by Discord's callback (already acknowledged), so the
	// daemon did nothing more with it.
	if cbs := discordfake.Find(reqs, "POST", "/api/v9/interactions/*/"+tokenA+"/callback"); len(cbs) != 2 || cbs[0].Status != 204 {
		t.Errorf("run A's callbacks %+v, want the acknowledgement and the refused redelivery", cbs)
	}
	if l := logs.String(); !strings.Contains(l, "already acknowledged") || strings.Contains(l, "discord: acknowledge interaction") {
		t.Errorf("the refused redelivery is not logged as a duplicate (and only so):\n%s", l)
	}
	if n := len(discordfake.Find(reqs, "POST", "/api/v9/channels/"+discordfake.Channel+"/messages/"+threadA+"/threads")); n != 1 {
		t.Errorf("run A's thread was started %d times, want once", n)
	}
	// Nobody was told anything went wrong: no ephemeral follow-up, no notice in a thread.
	if fu := discordfake.Find(reqs, "POST", "/api/v9/webhooks/*/*"); len(fu) != 0 {
		t.Errorf("follow-ups %+v, want none", fu)
	}
	if n := len(model.Requests()); n != 3 {
		t.Errorf("the model was asked %d times, want 3 (one answer per goal)", n)
	}
	runs := invariants{db: s.db, goals: []string{goalA, goalB, goalC}, shown: f.Texts(), logs: logs.String(),
		secrets: []string{discordToken}, settled: true}.check(t)
	if len(runs) != 3 {
		t.Errorf("%d runs, want 3", len(runs))
	}
	for _, r := range runs {
		if r.Status != agent.StatusCompleted {
			t.Errorf("run %s (%q) is %s, want completed", r.ID, r.State.Goal, r.Status)
		}
	}
}

// TestFaultDiscord429RetryAfter answers the routes of a run's thread with Discord's 429
// (retry_after body, Retry-After and X-RateLimit-* headers): opening the thread once, the
// status card's first post twice, its first edit once, and the second part of a two-part
// answer once. Each time the bot waits at least retry_after before it calls again, the run
// is not lost, the card and the whole answer arrive, and nothing is posted twice.
func TestFaultDiscord429RetryAfter(t *testing.T) {
	bin := loopbotBinary(t)
	f := newDiscordFake(t)
	const goal = "write the quarterly report"
	// An answer that Discord's 2000-character limit splits into two messages.
	var answer strings.Builder
	for i := range 30 {
		fmt.Fprintf(&answer, "Paragraph %02d of the quarterly report: revenue, costs and the outlook, in one line.\n\n", i)
	}
	last := "Paragraph 29 of the quarterly report"
	asked, release, end := make(chan struct{}), make(chan struct{}), make(chan struct{})
	model := llmtest.NewTest(t)
	t.Cleanup(func() { close(end) })
	model.Push(
		llmtest.Func(func(llmtest.Request) llmtest.Step {
			close(asked)
			select {
			case <-release:
			case <-end:
			}
			return llmtest.ToolCalls(llmtest.Call("update_plan", `{"plan":[{"step":"gather the numbers","status":"done"},{"step":"write the report","status":"in_progress"}]}`))
		}),
		llmtest.Text(strings.TrimSpace(answer.String())),
	)
	s := discordSetup(t, model, f, "")
	logs := newLogBuffer()

	const retryAfter = time.Second
	p := startLoopbot(t, bin, s.config, s.env, logs)
	waitDiscordGateway(t, f, logs)
	id, token := f.Interaction()
	thread := "orig-" + token
	posts, edits := "/api/v9/channels/"+thread+"/messages", "/api/v9/channels/"+thread+"/messages/*"
	f.RateLimit("POST", posts, 2, retryAfter)  // the card's first post
	f.RateLimit("PATCH", edits, 1, retryAfter) // the card's first edit
	// Opening the run's thread, which the adapter does itself after the acknowledgement.
	f.RateLimit("POST", "/api/v9/channels/"+discordfake.Channel+"/messages/"+thread+"/threads", 1, retryAfter)
	second := discordfake.RateLimitFault("POST", posts, 1, retryAfter)
	second.Skip = 2 // the card, then the answer's first part go through
	f.Inject(second)
	if err := f.Dispatch("INTERACTION_CREATE", discordfake.SlashPayload(id, token, discordfake.Channel, "", "loopbot", discordfake.GoalOption(goal))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-asked:
	case <-time.After(discordWait):
		t.Fatalf("the model was not asked; logs:\n%s", logs)
	}
	// Let the run go on once its card is up, so that its next state is an edit.
	waitDiscord(t, f, logs, "the status card", func() bool { return len(discordThread(f, thread).cards) == 1 })
	close(release)
	waitDiscord(t, f, logs, "the whole answer and the final card", func() bool { return discordThread(f, thread).done(last) })
	p.terminate(25 * time.Second)

	reqs := f.Requests()
	// After a 429 the bot holds the thread for retry_after, and the adapter waits as long
	// before it tries to open the thread again: the next call into the thread (or to the
	// thread-start route) comes no sooner. A lower bound: time only moves forward.
	inThread := func(r discordfake.Request) bool { return strings.HasPrefix(r.Path, "/api/v9/channels/"+thread+"/") }
	var limited int
	for i, r := range reqs {
		if r.Status != http.StatusTooManyRequests {
			continue
		}
		limited++
		for _, next := range reqs[i+1:] {
			if inThread(r) && inThread(next) || next.Path == r.Path {
				if gap := next.At.Sub(r.At); gap < retryAfter {
					t.Errorf("%s %s came %s after the 429 on %s %s, want at least %s", next.Method, next.Path, gap, r.Method, r.Path, retryAfter)
				}
				break
			}
		}
	}
	if limited != 5 {
		t.Errorf("%d requests were answered 429, want 5:\n%s", limited, discordfake.Describe(reqs))
	}
	discordOnce(t, f, thread, last)
	v := discordThread(f, thread)
	if got := strings.Join(v.texts, "\n\n"); !strings.Contains(got, "Paragraph 00 of") || strings.Count(got, "Paragraph ") != 30 {
		t.Errorf("the thread shows %d paragraphs, want the 30 of the answer once each", strings.Count(got, "Paragraph "))
	}
	if plan, _ := v.cards[0]["description"].(string); !strings.Contains(plan, "gather the numbers") {
		t.Errorf("final card %q, want the plan the model set", plan)
	}
	// Each message was created by exactly one successful POST.
	created := 0
	for _, r := range discordfake.Find(reqs, "POST", posts) {
		if r.Status == http.StatusOK {
			created++
		}
	}
	if n := len(f.ChannelMessages(thread)); created != n {
		t.Errorf("%d successful posts for %d messages in the thread", created, n)
	}
	runs := invariants{db: s.db, goals: []string{goal}, shown: f.Texts(), logs: logs.String(), secrets: []string{discordToken}, settled: true}.check(t)
	if len(runs) != 1 || runs[0].Status != agent.StatusCompleted {
		t.Fatalf("runs %+v, want one completed", runs)
	}
}

// discordSignedPost posts sent to the interactions endpoint with Discord's signature headers
// for body made with key (none if key is nil) at ts, and returns the status and the body of
// the answer.
func discordSignedPost(t *testing.T, url string, key ed25519.PrivateKey, ts time.Time, body, sent []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader(sent))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != nil {
		stamp := strconv.FormatInt(ts.Unix(), 10)
		req.Header.Set("X-Signature-Timestamp", stamp)
		req.Header.Set("X-Signature-Ed25519", hex.EncodeToString(ed25519.Sign(key, append([]byte(stamp), body...))))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// TestFaultDiscordForgedSignature runs the daemon with Discord's HTTP interactions endpoint
// and sends it what an attacker (or Discord's own security probe) would: /loopbot commands
// with a forged signature, none, a stale timestamp, a body changed after signing, and a
// correctly signed but oversized body. All are refused and start nothing; a correctly signed
// PING gets PONG, and a correctly signed command starts exactly one run, also when the
// same signed request is replayed.
func TestFaultDiscordForgedSignature(t *testing.T) {
	bin := loopbotBinary(t)
	f := newDiscordFake(t)
	const goal = "check the signed request path"
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		return llmtest.Text("Finished: " + discordGoalOf(r, goal) + ".")
	}))
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, forger, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	s := discordSetup(t, model, f, fmt.Sprintf("mode = \"http\"\npublic_key = %q\nlisten_addr = %q\n", hex.EncodeToString(pub), addr))
	logs := newLogBuffer()
	p := startLoopbot(t, bin, s.config, s.env, logs)
	ctx, cancel := context.WithTimeout(context.Background(), discordWait)
	defer cancel()
	if _, ok := logs.waitFor(ctx, 0, "discord: serving interactions"); !ok {
		t.Fatalf("the interactions endpoint did not come up; logs:\n%s", logs)
	}
	url := "http://" + addr + "/"

	command := func(goal string) (token string, body []byte) {
		id, token := f.Interaction()
		body, err := json.Marshal(discordfake.SlashPayload(id, token, discordfake.Channel, "", "loopbot", discordfake.GoalOption(goal)))
		if err != nil {
			t.Fatal(err)
		}
		return token, body
	}
	now := time.Now()
	var refused []string // the tokens of the refused commands
	forgedTok, forged := command("forged: delete everything")
	tamperTok, tamper := command("tampered: list the files")
	tampered := bytes.Replace(tamper, []byte("list the files"), []byte("wipe the files"), 1)
	bareTok, bare := command("unsigned: list the files")
	staleTok, stale := command("stale: list the files")
	bigTok, big := command("oversized: " + strings.Repeat("x", 1<<20))
	refused = append(refused, forgedTok, tamperTok, bareTok, staleTok, bigTok)
	tests := []struct {
		name       string
		key        ed25519.PrivateKey
		at         time.Time
		body, sent []byte
		want       int
	}{
		{"signed by another key", forger, now, forged, forged, http.StatusUnauthorized},
		{"body changed after signing", priv, now, tamper, tampered, http.StatusUnauthorized},
		{"no signature", nil, now, bare, bare, http.StatusUnauthorized},
		{"timestamp six minutes old", priv, now.Add(-6 * time.Minute), stale, stale, http.StatusUnauthorized},
		{"oversized, correctly signed", priv, now, big, big, http.StatusBadRequest},
	}
	for _, tt := range tests {
		if status, body := discordSignedPost(t, url, tt.key, tt.at, tt.body, tt.sent); status != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, status, body, tt.want)
		}
	}
	ping, _ := json.Marshal(discordfake.PingPayload("1200000000000000001"))
	if status, body := discordSignedPost(t, url, priv, now, ping, ping); status != 200 || !bytes.Equal(bytes.TrimSpace(body), []byte(`{"type":1}`)) {
		t.Errorf("signed PING: %d %s, want 200 with PONG (type 1)", status, body)
	}

	token, good := command(goal)
	thread := "orig-" + token
	for i := range 2 { // the second is a replay of the same signed request
		if status, body := discordSignedPost(t, url, priv, now, good, good); status != 200 || !bytes.Contains(body, []byte(`"type":5`)) {
			t.Errorf("signed command (delivery %d): %d %s, want 200 with the deferred response (type 5)", i+1, status, body)
		}
	}
	answer := "Finished: " + goal + "."
	waitDiscord(t, f, logs, "the answer", func() bool { return discordThread(f, thread).done(answer) })
	p.terminate(25 * time.Second)

	discordOnce(t, f, thread, answer)
	reqs := f.Requests()
	for _, tok := range refused {
		for _, r := range reqs {
			if strings.Contains(r.Path, tok) {
				t.Errorf("a refused interaction reached Discord: %s %s", r.Method, r.Path)
			}
		}
	}
	if n := len(discordfake.Find(reqs, "POST", "/api/v9/interactions/*/*/callback")); n != 0 {
		t.Errorf("%d callback requests; in HTTP mode the deferred response is the HTTP answer", n)
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("the model was asked %d times, want once", n)
	}
	runs := invariants{db: s.db, goals: []string{goal}, shown: f.Texts(), logs: logs.String(), secrets: []string{discordToken}, settled: true}.check(t)
	if len(runs) != 1 || runs[0].Status != agent.StatusCompleted {
		t.Fatalf("runs %+v, want exactly one, completed", runs)
	}
}
