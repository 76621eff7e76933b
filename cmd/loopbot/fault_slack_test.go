package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/adapters/slack/slackfake"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// The Slack fault tests run the real binary against slackfake, Slack at the protocol level,
// and break what Slack can break: the socket drops mid-run, Slack asks for a refresh, an
// event is delivered again after a crash, the Web API answers 429 or 500, and forged or
// oversized requests reach the HTTP endpoint. Whatever happens, every acknowledged mention
// must have started exactly one run, and no Slack credential may be posted or logged.

// Canary Slack credentials the daemon is given.
const (
	slackBotCanary    = "xoxb-canary-4d2f9b7e1a3c5e7f"
	slackAppCanary    = "xapp-1-canary-8e6c0a2f4b1d3f5a"
	slackSecretCanary = "signing-canary-0f9e8d7c6b5a4f3e"
)

var slackSecrets = []string{slackBotCanary, slackAppCanary, slackSecretCanary}

// slackWait bounds every wait of these tests.
const slackWait = 30 * time.Second

// slackFault is one test's world: the fake Slack, the scripted model, the config and the
// daemon's log, shared by the daemons the test starts one after the other.
type slackFault struct {
	t     *testing.T
	bin   string
	fake  *slackfake.Server
	model *goalModel
	setup faultSetup
	logs  *logBuffer
	// barriers counts the status mentions statusBarrier sent, for their timestamps.
	barriers int
}

// newSlackFault writes a config for the binary with Slack on against a new fake, edits paced
// 100ms apart, and the [slack] keys of slackTOML; env adds to the environment (the tokens).
func newSlackFault(t *testing.T, model *goalModel, slackTOML string, env ...string) *slackFault {
	t.Helper()
	bin := loopbotBinary(t)
	fake, err := slackfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	extra := fmt.Sprintf("[log]\nlevel = \"debug\"\n[bot]\nedit_interval = \"100ms\"\n[slack]\napi_url = %q\n%s", fake.APIURL(), slackTOML)
	s := newFaultSetup(t, model.srv, extra)
	s.env = append(s.env, env...)
	return &slackFault{t: t, bin: bin, fake: fake, model: model, setup: s, logs: newLogBuffer()}
}

// newSocketFault is newSlackFault in Socket Mode.
func newSocketFault(t *testing.T, model *goalModel) *slackFault {
	t.Helper()
	return newSlackFault(t, model, "mode = \"socket\"\n", "SLACK_BOT_TOKEN="+slackBotCanary, "SLACK_APP_TOKEN="+slackAppCanary)
}

// start starts a daemon; in Socket Mode it waits for the daemon's connection, the conns-th
// the fake has seen.
func (sf *slackFault) start(conns int) *loopbotProc {
	sf.t.Helper()
	p := startLoopbot(sf.t, sf.bin, sf.setup.config, sf.setup.env, sf.logs)
	if conns > 0 {
		sf.wait(fmt.Sprintf("socket mode connection %d", conns), func() bool { return sf.fake.Connections() >= conns })
	}
	return p
}

// wait waits for cond on the fake's records, failing the test after slackWait.
func (sf *slackFault) wait(what string, cond func() bool) {
	sf.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), slackWait)
	defer cancel()
	if err := sf.fake.Wait(ctx, cond); err != nil {
		sf.t.Fatalf("waiting for %s: %v\nlogs:\n%s", what, err, sf.logs)
	}
}

// mention sends an app_mention of goal at ts, the root of its thread in channel.
func (sf *slackFault) mention(envelopeID, eventID, channel, ts, goal string) {
	sf.t.Helper()
	if err := sf.fake.Send("events_api", envelopeID, slackfake.MentionCallback(eventID, channel, ts, "", "<@"+slackfake.BotUserID+"> "+goal)); err != nil {
		sf.t.Fatal(err)
	}
}

// ack waits for the first acknowledgement of envelopeID.
func (sf *slackFault) ack(envelopeID string) slackfake.Ack {
	sf.t.Helper()
	var a slackfake.Ack
	sf.wait("the ack of "+envelopeID, func() bool {
		for _, x := range sf.fake.Acks() {
			if x.EnvelopeID == envelopeID {
				a = x
				return true
			}
		}
		return false
	})
	return a
}

// acks counts the acknowledgements of envelopeID.
func (sf *slackFault) acks(envelopeID string) int {
	n := 0
	for _, a := range sf.fake.Acks() {
		if a.EnvelopeID == envelopeID {
			n++
		}
	}
	return n
}

// posted returns the calls of method that Slack took (answered 200, no injected failure)
// whose text or blocks contain s.
func (sf *slackFault) posted(method, s string) []slackfake.Call {
	var out []slackfake.Call
	for _, c := range sf.fake.CallsOf(method) {
		if c.Status == http.StatusOK && !c.Injected && strings.Contains(c.Values.Get("text")+c.Values.Get("blocks"), s) {
			out = append(out, c)
		}
	}
	return out
}

// waitAnswer waits for the answer to goal to be posted.
func (sf *slackFault) waitAnswer(goal string) {
	sf.t.Helper()
	sf.wait("the answer to "+goal, func() bool { return len(sf.posted("chat.postMessage", answerTo(goal))) > 0 })
}

// statusBarrier mentions "status" in the thread at threadTS of channel and waits for the
// notice that answers it. The adapter hands the deliveries of one thread to the bot in the
// order they came, so once the notice is out every delivery to that thread sent before it
// (a redelivery, say) has been handled. It returns the notice.
func (sf *slackFault) statusBarrier(envelopeID, channel, threadTS string) string {
	sf.t.Helper()
	match := func() []slackfake.Call {
		var out []slackfake.Call
		for _, c := range sf.posted("chat.postEphemeral", "") {
			if c.Values.Get("channel") == channel && c.Values.Get("thread_ts") == threadTS {
				out = append(out, c)
			}
		}
		return out
	}
	before := len(match())
	sf.barriers++
	ts := fmt.Sprintf("1700000900.%06d", sf.barriers)
	cb := slackfake.MentionCallback("Ev-"+envelopeID, channel, ts, threadTS, "<@"+slackfake.BotUserID+"> status")
	if err := sf.fake.Send("events_api", envelopeID, cb); err != nil {
		sf.t.Fatal(err)
	}
	var got []slackfake.Call
	sf.wait("the status notice in "+channel+"/"+threadTS, func() bool { got = match(); return len(got) > before })
	sf.ack(envelopeID)
	return got[len(got)-1].Values.Get("text")
}

// shown is everything the daemon sent to Slack to be shown, including what Slack refused.
func (sf *slackFault) shown() []string {
	var out []string
	for _, c := range sf.fake.Calls() {
		switch c.Method {
		case "chat.postMessage", "chat.update", "chat.postEphemeral", "response_url":
			out = append(out, c.Values.Get("text"), c.Values.Get("blocks"), c.Values.Get("body"))
		}
	}
	return out
}

// checkOnce asserts that each goal's status card was posted once and its answer posted
// once, and that no delivery was queued as a second request in a thread.
func (sf *slackFault) checkOnce(goals ...string) {
	sf.t.Helper()
	for _, g := range goals {
		if n := len(sf.posted("chat.postMessage", answerTo(g))); n != 1 {
			sf.t.Errorf("the answer to %q was posted %d times, want once", g, n)
		}
		cards := 0
		for _, c := range sf.posted("chat.postMessage", g) {
			if strings.Contains(c.Values.Get("blocks"), ":robot_face:") {
				cards++
			}
		}
		if cards != 1 {
			sf.t.Errorf("the status card of %q was posted %d times, want once and then edited", g, cards)
		}
		if n, want := sf.model.asked(g), sf.model.perRun(); n != want {
			sf.t.Errorf("the model was asked %d times about %q, want %d: one run's worth", n, g, want)
		}
	}
	if n := len(sf.posted("chat.postMessage", "it starts when the current run")); n != 0 {
		sf.t.Errorf("%d deliveries were queued behind a run: a redelivery was taken for a new request", n)
	}
}

// check runs the fault suite's invariants on the database of the daemon, which the caller
// has stopped, with everything sent to Slack as shown and the Slack credentials as secrets;
// goals are the mentions whose acks the fake read.
func (sf *slackFault) check(goals ...string) []*bot.RunRecord {
	sf.t.Helper()
	return invariants{db: sf.setup.db, goals: goals, shown: sf.shown(), logs: sf.logs.String(), secrets: slackSecrets, settled: true}.check(sf.t)
}

// answerTo is what the model answers to goal.
func answerTo(goal string) string { return "Answer to " + goal + "." }

// goalModel is a scripted model that answers each run's goal with answerTo(goal) and counts
// the requests per goal. The held goal's first request waits until release is called;
// with tool set, each run first lists the workspace and answers after the result.
type goalModel struct {
	srv     *llmtest.Server
	goals   []string
	held    string
	tool    bool
	release func()

	mu      sync.Mutex
	counts  map[string]int
	changed chan struct{}
}

func newGoalModel(t *testing.T, held string, tool bool, goals ...string) *goalModel {
	t.Helper()
	m := &goalModel{srv: llmtest.NewTest(t), goals: goals, held: held, tool: tool, counts: map[string]int{}, changed: make(chan struct{})}
	gate := make(chan struct{})
	var once sync.Once
	m.release = func() { once.Do(func() { close(gate) }) }
	// Registered after the server's own cleanup, so it runs first and a held request
	// does not keep the server from closing.
	t.Cleanup(m.release)
	m.srv.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		goal := m.goalOf(r)
		m.mu.Lock()
		m.counts[goal]++
		first := m.counts[goal] == 1
		close(m.changed)
		m.changed = make(chan struct{})
		m.mu.Unlock()
		if goal != "" && goal == m.held && first {
			<-gate
		}
		if m.tool && r.LastMessage().Role != "tool" {
			return llmtest.ToolCalls(llmtest.Call("list_files", `{"path":"."}`))
		}
		return llmtest.Text(answerTo(goal))
	}))
	return m
}

// goalOf finds which goal a request is about.
func (m *goalModel) goalOf(r llmtest.Request) string {
	for _, msg := range r.Messages {
		if msg.Role != "user" {
			continue
		}
		for _, g := range m.goals {
			if strings.Contains(msg.Content, g) {
				return g
			}
		}
	}
	return ""
}

// perRun is how many requests one run makes.
func (m *goalModel) perRun() int {
	if m.tool {
		return 2
	}
	return 1
}

// asked is how many requests the model has had about goal.
func (m *goalModel) asked(goal string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[goal]
}

// waitAsked waits until the model has been asked about goal.
func (m *goalModel) waitAsked(t *testing.T, goal string) {
	t.Helper()
	deadline := time.After(slackWait)
	for {
		m.mu.Lock()
		n, changed := m.counts[goal], m.changed
		m.mu.Unlock()
		if n > 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the model was not asked about %q within %s", goal, slackWait)
		}
	}
}

// TestFaultSlackSocketDroppedMidRun: while run A waits on the model, the socket dies just as
// the ack of mention B comes back, with mention C written behind it; mention D comes on the
// new connection. B (and C, if its ack was lost too) is delivered again on the new
// connection; the redelivery is handled as a duplicate; every run completes once.
func TestFaultSlackSocketDroppedMidRun(t *testing.T) {
	const (
		goalA = "summarise the incident log"
		goalB = "list the open pull requests"
		goalC = "draft the release notes"
		goalD = "check the nightly build"
	)
	model := newGoalModel(t, goalA, false, goalA, goalB, goalC, goalD)
	sf := newSocketFault(t, model)
	p := sf.start(1)

	sf.mention("env-a", "Ev-a", "C1", "1700000000.000100", goalA)
	sf.ack("env-a")
	model.waitAsked(t, goalA)

	sf.fake.DropConnectionOnAck("env-b")
	sf.mention("env-b", "Ev-b", "C2", "1700000000.000200", goalB)
	sf.mention("env-c", "Ev-c", "C3", "1700000000.000300", goalC)
	sf.wait("the reconnection after the drop", func() bool { return sf.fake.Connections() >= 2 })
	sf.mention("env-d", "Ev-d", "C4", "1700000000.000400", goalD)

	if a := sf.ack("env-b"); a.Deliveries != 2 || a.Connection != 2 {
		t.Errorf("env-b acknowledged after %d deliveries on connection %d, want its redelivery on connection 2", a.Deliveries, a.Connection)
	}
	sf.ack("env-c")
	sf.ack("env-d")
	for _, g := range []string{goalB, goalC, goalD} {
		model.waitAsked(t, g)
	}
	// A's model call was in flight across the drop; it ends only now.
	model.release()
	for _, g := range []string{goalA, goalB, goalC, goalD} {
		sf.waitAnswer(g)
	}
	for _, th := range []struct{ env, channel, ts string }{{"env-sb", "C2", "1700000000.000200"}, {"env-sc", "C3", "1700000000.000300"}} {
		if n := sf.statusBarrier(th.env, th.channel, th.ts); strings.Count(n, "•") != 1 {
			t.Errorf("status of %s: %q, want exactly one run", th.channel, n)
		}
	}
	if un := sf.fake.Unacked(); len(un) != 0 {
		t.Errorf("envelopes never acknowledged: %v", un)
	}
	p.terminate(25 * time.Second)

	sf.checkOnce(goalA, goalB, goalC, goalD)
	runs := sf.check(goalA, goalB, goalC, goalD)
	checkCompleted(t, runs, 4)
}

// TestFaultSlackRefreshRequested: Slack asks for a refresh (disconnect: refresh_requested)
// while run A waits on the model, and mention B is written right behind the request on the
// old connection. The client reconnects once and keeps working: B and C (sent on the new
// connection) each start one run, nothing is handled or posted twice.
func TestFaultSlackRefreshRequested(t *testing.T) {
	const (
		goalA = "summarise the incident log"
		goalB = "list the open pull requests"
		goalC = "check the nightly build"
	)
	model := newGoalModel(t, goalA, false, goalA, goalB, goalC)
	sf := newSocketFault(t, model)
	p := sf.start(1)

	sf.mention("env-a", "Ev-a", "C1", "1700000000.000100", goalA)
	sf.ack("env-a")
	model.waitAsked(t, goalA)

	if err := sf.fake.SendDisconnect("refresh_requested"); err != nil {
		t.Fatal(err)
	}
	sf.mention("env-b", "Ev-b", "C2", "1700000000.000200", goalB)
	sf.wait("the reconnection after the refresh", func() bool { return sf.fake.Connections() >= 2 })
	sf.mention("env-c", "Ev-c", "C3", "1700000000.000300", goalC)
	sf.ack("env-b")
	sf.ack("env-c")
	model.release()
	for _, g := range []string{goalA, goalB, goalC} {
		sf.waitAnswer(g)
	}
	if n := sf.statusBarrier("env-sb", "C2", "1700000000.000200"); strings.Count(n, "•") != 1 {
		t.Errorf("status of C2: %q, want exactly one run", n)
	}
	if n := sf.fake.Connections(); n != 2 {
		t.Errorf("%d socket mode connections, want 2: one reconnection for one refresh", n)
	}
	for _, env := range []string{"env-a", "env-c", "env-sb"} {
		if n := sf.acks(env); n != 1 {
			t.Errorf("%s acknowledged %d times, want once", env, n)
		}
	}
	p.terminate(25 * time.Second)

	sf.checkOnce(goalA, goalB, goalC)
	runs := sf.check(goalA, goalB, goalC)
	checkCompleted(t, runs, 3)
}

// TestFaultSlackEventRedeliveredAfterRestart: a mention is acknowledged and its run
// completes; the daemon is killed with SIGKILL and started again, and Slack delivers the same
// event once more (same event_id, new envelope ID, as a Slack retry does). The restarted
// daemon remembers the event: no second run. A second mention, in another thread of the same
// channel, is cut off by the kill wherever it is and still ends with one run.
func TestFaultSlackEventRedeliveredAfterRestart(t *testing.T) {
	const (
		goal  = "summarise the incident log"
		other = "list the open pull requests"
	)
	model := newGoalModel(t, "", false, goal, other)
	sf := newSocketFault(t, model)
	p := sf.start(1)

	sf.mention("env-1", "Ev-restart", "C1", "1700000000.000100", goal)
	sf.ack("env-1")
	sf.waitAnswer(goal)
	// The channel's messages go out one at a time, each settled in the store before the
	// next, so once the other run's card is out the answer is settled: the kill cannot make
	// the restarted daemon post it again (a message posted but not yet settled when the
	// process dies is posted again, by design).
	sf.mention("env-2", "Ev-other", "C1", "1700000000.000200", other)
	sf.ack("env-2")
	sf.wait("the second run's card", func() bool {
		for _, c := range sf.posted("chat.postMessage", other) {
			if strings.Contains(c.Values.Get("blocks"), ":robot_face:") {
				return true
			}
		}
		return false
	})
	p.kill()

	p = sf.start(2)
	sf.mention("env-3", "Ev-restart", "C1", "1700000000.000100", goal)
	if a := sf.ack("env-3"); a.Connection != 2 {
		t.Errorf("the redelivery was acknowledged on connection %d, want 2", a.Connection)
	}
	if n := sf.statusBarrier("env-status", "C1", "1700000000.000100"); strings.Count(n, "•") != 1 {
		t.Errorf("status after the redelivery: %q, want exactly one run", n)
	}
	sf.waitAnswer(other)
	p.terminate(25 * time.Second)

	sf.checkOnce(goal)
	runs := sf.check(goal, other)
	checkCompleted(t, runs, 2)
}

// TestFaultSlackChatUpdate429: Slack answers the first chat.update with 429 and
// Retry-After: 2. The daemon sends nothing to that channel for 2 seconds, then the card
// reaches its final state; no edit is lost and none is hammered.
func TestFaultSlackChatUpdate429(t *testing.T) {
	const (
		goal       = "count the files in the workspace"
		retryAfter = 2 * time.Second
	)
	model := newGoalModel(t, "", true, goal)
	sf := newSocketFault(t, model)
	sf.fake.FailNext("chat.update", 1, slackfake.RateLimited(retryAfter))
	p := sf.start(1)

	sf.mention("env-1", "Ev-429", "C1", "1700000000.000100", goal)
	sf.ack("env-1")
	sf.waitAnswer(goal)
	var card string
	sf.wait("the status card", func() bool {
		for _, c := range sf.posted("chat.postMessage", ":robot_face:") {
			card = c.TS
		}
		return card != ""
	})
	sf.wait("the card's final state", func() bool {
		ups := sf.fake.CallsOf("chat.update")
		last := len(ups) - 1
		return last >= 0 && ups[last].Status == http.StatusOK && ups[last].Values.Get("ts") == card &&
			strings.Contains(ups[last].Values.Get("blocks"), "Done")
	})
	p.terminate(25 * time.Second)

	var limited time.Time
	var after []slackfake.Call // calls to C1 after the 429
	for _, c := range sf.fake.Calls() {
		switch {
		case c.Method == "chat.update" && c.Status == http.StatusTooManyRequests:
			limited = c.At
		case !limited.IsZero() && c.Values.Get("channel") == "C1":
			after = append(after, c)
		}
	}
	if limited.IsZero() {
		t.Fatal("no chat.update was answered 429")
	}
	if len(after) == 0 {
		t.Fatal("nothing reached the channel after the 429")
	}
	// Timers never fire early, so this holds however slow the machine is.
	if gap := after[0].At.Sub(limited); gap < retryAfter {
		t.Errorf("%s reached the channel %s after the 429, want at least Retry-After %s", after[0].Method, gap, retryAfter)
	}
	// No hammering: after the hold the card is edited to its latest state, and again only
	// when it changed (a short run that ended during the hold has nothing left to change),
	// never twice with the same content.
	var updates []slackfake.Call
	for _, c := range after {
		if c.Method == "chat.update" {
			updates = append(updates, c)
		}
	}
	if len(updates) == 0 || len(updates) > 3 {
		t.Errorf("%d chat.update calls after the 429, want 1 to 3", len(updates))
	}
	for i := 1; i < len(updates); i++ {
		if updates[i].Values.Get("blocks") == updates[i-1].Values.Get("blocks") {
			t.Errorf("chat.update %d after the 429 sent the card unchanged", i)
		}
	}
	sf.checkOnce(goal)
	runs := sf.check(goal)
	checkCompleted(t, runs, 1)
	checkOutboxEmpty(t, sf.setup.db)
}

// TestFaultSlackPostMessage500: Slack answers chat.postMessage with 500 three times. The
// daemon retries with a backoff, the status card and the answer are each posted exactly once
// in the end, and the run is not lost.
func TestFaultSlackPostMessage500(t *testing.T) {
	const goal = "summarise the incident log"
	const failures = 3
	model := newGoalModel(t, "", false, goal)
	sf := newSocketFault(t, model)
	sf.fake.FailNext("chat.postMessage", failures, slackfake.ServerError())
	p := sf.start(1)

	sf.mention("env-1", "Ev-500", "C1", "1700000000.000100", goal)
	sf.ack("env-1")
	sf.waitAnswer(goal)
	// The card shows the end of the run, posted that way or edited to it.
	sf.wait("the card's final state", func() bool {
		for _, m := range []string{"chat.postMessage", "chat.update"} {
			for _, c := range sf.posted(m, ":robot_face:") {
				if strings.Contains(c.Values.Get("blocks"), "Done") {
					return true
				}
			}
		}
		return false
	})
	p.terminate(25 * time.Second)

	posts := sf.fake.CallsOf("chat.postMessage")
	if len(posts) < failures+2 {
		t.Fatalf("%d chat.postMessage calls, want %d refused and the card and the answer", len(posts), failures)
	}
	for i, c := range posts[:failures] {
		if c.Status != http.StatusInternalServerError {
			t.Errorf("post %d answered %d, want the injected 500", i, c.Status)
		}
		// Each retry waits at least the first backoff step: no hammering.
		if next := posts[i+1]; next.At.Sub(c.At) < time.Second {
			t.Errorf("post %d came %s after the 500 before it, want at least 1s", i+1, next.At.Sub(c.At))
		}
	}
	sf.checkOnce(goal)
	runs := sf.check(goal)
	checkCompleted(t, runs, 1)
	checkOutboxEmpty(t, sf.setup.db)
}

// TestFaultSlackForgedSignature runs Slack in HTTP mode: requests with a forged, missing or
// stale signature, or a body signed for another one, are refused with 401 on each of the
// three endpoints; a correctly signed body of several megabytes is refused as too large;
// none of them starts a run or reaches the chat. A correctly signed mention then works.
func TestFaultSlackForgedSignature(t *testing.T) {
	const goal = "summarise the incident log"
	model := newGoalModel(t, "", false, goal)
	addr := freeAddr(t)
	sf := newSlackFault(t, model, fmt.Sprintf("mode = \"http\"\nlisten_addr = %q\n", addr),
		"SLACK_BOT_TOKEN="+slackBotCanary, "SLACK_SIGNING_SECRET="+slackSecretCanary)
	p := sf.start(0)
	// The adapter listens before it asks auth.test who it is, and serves once it knows.
	sf.wait("auth.test", func() bool { return len(sf.fake.CallsOf("auth.test")) > 0 })
	base := "http://" + addr

	body := func(n int, text string) []byte {
		b, _ := json.Marshal(slackfake.MentionCallback(fmt.Sprintf("Ev-forged-%d", n), "C1", fmt.Sprintf("1700000000.%06d", 200+n), "", "<@"+slackfake.BotUserID+"> "+text))
		return b
	}
	// A slash command and a click, as Slack posts them: forms.
	command := []byte(url.Values{"team_id": {slackfake.TeamID}, "channel_id": {"C1"}, "user_id": {slackfake.UserID}, "command": {"/loopbot"},
		"text": {"forged goal seven"}, "trigger_id": {"trig-forged"}}.Encode())
	click, _ := json.Marshal(slackfake.ClickPayload(slackfake.Click{TriggerID: "trig-forged-click", UserID: slackfake.UserID, UserName: "ann",
		Channel: "C1", ThreadTS: "1700000000.000100", MessageTS: "1700000001.000100", Value: "forged-action", ActionTS: "1700000002.000100"}))
	clickForm := []byte(url.Values{"payload": {string(click)}}.Encode())
	const form = "application/x-www-form-urlencoded"
	now := time.Now()
	forged := []struct {
		name, path, contentType string
		body                    []byte
		header                  http.Header
	}{
		{"signed with another secret", "/slack/events", "application/json", body(1, "forged goal one"), slackfake.Sign("not-the-secret", body(1, "forged goal one"), now)},
		{"no signature", "/slack/events", "application/json", body(2, "forged goal two"), http.Header{}},
		{"signed ten minutes ago", "/slack/events", "application/json", body(3, "forged goal three"), slackfake.Sign(slackSecretCanary, body(3, "forged goal three"), now.Add(-10*time.Minute))},
		{"signature of another body", "/slack/events", "application/json", body(4, "forged goal four"), slackfake.Sign(slackSecretCanary, body(4, "an innocent goal"), now)},
		{"signature without its timestamp", "/slack/events", "application/json", body(5, "forged goal five"), func() http.Header {
			h := slackfake.Sign(slackSecretCanary, body(5, "forged goal five"), now)
			h.Del("X-Slack-Request-Timestamp")
			return h
		}()},
		{"slash command signed with another secret", "/slack/commands", form, command, slackfake.Sign("not-the-secret", command, now)},
		{"click signed with another secret", "/slack/interactions", form, clickForm, slackfake.Sign("not-the-secret", clickForm, now)},
	}
	for _, tc := range forged {
		req, err := http.NewRequest(http.MethodPost, base+tc.path, bytes.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = tc.header
		req.Header.Set("Content-Type", tc.contentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %s, want 401", tc.name, resp.Status)
		}
	}

	big := body(6, "forged goal six "+strings.Repeat("x", 5<<20))
	if code := rawPost(t, addr, "/slack/events", big, slackfake.Sign(slackSecretCanary, big, time.Now())); code != http.StatusRequestEntityTooLarge && code != http.StatusBadRequest {
		t.Errorf("a 5 MB body: %d, want 413 or 400", code)
	}

	good := body(7, goal)
	req, err := http.NewRequest(http.MethodPost, base+"/slack/events", bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = slackfake.Sign(slackSecretCanary, good, time.Now())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a correctly signed mention: %s, want 200", resp.Status)
	}
	sf.waitAnswer(goal)
	p.terminate(25 * time.Second)

	if n := strings.Count(sf.logs.String(), "bad signature refused"); n != len(forged) {
		t.Errorf("%d refusals logged, want %d", n, len(forged))
	}
	// A forged command would have posted its goal; a forged click would have been told
	// the button is not valid.
	for _, text := range sf.shown() {
		if strings.Contains(text, "forged") {
			t.Errorf("a forged request reached the chat: %.80q", text)
		}
	}
	if n := len(sf.fake.CallsOf("chat.postEphemeral")); n != 0 {
		t.Errorf("%d ephemeral notices, want none: the only valid request is the mention", n)
	}
	sf.checkOnce(goal)
	runs := sf.check(goal)
	checkCompleted(t, runs, 1)
	for _, r := range runs {
		if strings.Contains(r.State.Goal, "forged") {
			t.Errorf("a forged request started run %s: %.60q", r.ID, r.State.Goal)
		}
	}
}

// rawPost sends a POST over a bare TCP connection and returns the status of the answer. The
// body goes out from its own goroutine, so a server that answers and closes before it has
// read everything (as it does for a body over its limit) is still heard.
func rawPost(t *testing.T, addr, path string, body []byte, h http.Header) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(slackWait))
	var head bytes.Buffer
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n", path, addr, len(body))
	for k, vs := range h {
		for _, v := range vs {
			fmt.Fprintf(&head, "%s: %s\r\n", k, v)
		}
	}
	head.WriteString("\r\n")
	go func() {
		// A write error means the server has stopped reading: the answer says why.
		if _, err := conn.Write(head.Bytes()); err == nil {
			_, _ = conn.Write(body)
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// checkCompleted asserts that there are n runs and all completed.
func checkCompleted(t *testing.T, runs []*bot.RunRecord, n int) {
	t.Helper()
	if len(runs) != n {
		t.Errorf("%d runs saved, want %d", len(runs), n)
	}
	for _, r := range runs {
		if r.Status != agent.StatusCompleted {
			t.Errorf("run %s (%.60q) is %s, want completed", r.ID, r.State.Goal, r.Status)
		}
	}
}

// checkOutboxEmpty asserts that the stopped daemon left nothing unsent.
func checkOutboxEmpty(t *testing.T, path string) {
	t.Helper()
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(context.Background(), func(tx bot.Tx) error {
		items, err := tx.Outbox()
		for _, it := range items {
			t.Errorf("outbox item %s (%s) left unsent", it.Key, it.Kind)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFaultSlackSIGTERMWithEnvelopesInFlight: while run A waits on the model, five mentions
// arrive and SIGTERM follows at once. The daemon exits 0; every envelope is either
// acknowledged and handled before the exit, or left unacknowledged for Slack to deliver again,
// never acknowledged and dropped. The next process resumes A, takes the redeliveries, and every
// mention ends with exactly one run.
func TestFaultSlackSIGTERMWithEnvelopesInFlight(t *testing.T) {
	goalA := "summarise the incident log"
	burst := []string{"list the open pull requests", "draft the release notes", "check the nightly build",
		"count the flaky tests", "name the oldest open issue"}
	model := newGoalModel(t, goalA, false, append([]string{goalA}, burst...)...)
	sf := newSocketFault(t, model)
	p := sf.start(1)

	sf.mention("env-a", "Ev-a", "C1", "1700000000.000100", goalA)
	sf.ack("env-a")
	model.waitAsked(t, goalA)
	for i, g := range burst {
		sf.mention(fmt.Sprintf("env-%d", i), fmt.Sprintf("Ev-%d", i), fmt.Sprintf("C%d", i+2), fmt.Sprintf("1700000001.%06d", i), g)
	}
	p.terminate(25 * time.Second)
	ackedBefore := len(sf.fake.Acks())
	if strings.Contains(sf.logs.String(), "acknowledged event dropped") {
		t.Errorf("an acknowledged event was dropped at shutdown:\n%s", sf.logs)
	}
	// A's first model call was cut off by the shutdown; its handler may go now.
	model.release()

	p = sf.start(2)
	for _, g := range append([]string{goalA}, burst...) {
		sf.waitAnswer(g)
	}
	if un := sf.fake.Unacked(); len(un) != 0 {
		t.Errorf("envelopes never acknowledged: %v", un)
	}
	p.terminate(25 * time.Second)
	t.Logf("%d of %d envelopes were acknowledged by the first process", ackedBefore, len(burst)+1)

	// A run whose model call the shutdown cut off asks again in the next process, so the
	// model may be asked twice about a goal; everything shown happens once.
	for _, g := range append([]string{goalA}, burst...) {
		if n := len(sf.posted("chat.postMessage", answerTo(g))); n != 1 {
			t.Errorf("the answer to %q was posted %d times, want once", g, n)
		}
		if n := model.asked(g); n < 1 || n > 2 {
			t.Errorf("the model was asked %d times about %q, want once, or twice if the shutdown cut the first call off", n, g)
		}
	}
	runs := sf.check(append([]string{goalA}, burst...)...)
	checkCompleted(t, runs, len(burst)+1)
}
