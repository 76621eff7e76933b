package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loopbot/loopbot/adapters/slack/slackfake"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// TestFaultThreeReplicasOnPostgres runs three loopbot processes on one PostgreSQL database,
// each with its Socket Mode connection to the fake Slack, and thirty mentions. With runs
// spread over the replicas and their first model calls held, it kills one replica with
// SIGKILL and stops another with SIGSTOP past its 3s leases, then lets the model answer. The
// third takes the runs over; the stopped one, continued, finds its checkpoints refused.
// Every acknowledged mention has one run, every run completes with its answer posted once,
// no call ran twice, the stopped replica's late writes were fenced, and calls to the
// channel stayed paced across the replicas.
func TestFaultThreeReplicasOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	bin := loopbotBinary(t)
	fake, err := slackfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)

	goals := replicaGoals(30)
	model := newGatedModel(t, goals)
	rf := &replicaFault{t: t, bin: bin, fake: fake, url: url, model: model.srv, dir: t.TempDir()}
	a, b, c := rf.start("ra", 1), rf.start("rb", 2), rf.start("rc", 3)
	allLogs := func() string { return a.logs.String() + b.logs.String() + c.logs.String() }
	open := model.open
	askedGoals := model.askedGoals

	// The fake delivers on its newest connection: c receives every mention, and the runs
	// are spread by the replicas' claims.
	rf.mention(goals)
	waitLogs := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(slackWait)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; logs:\n%s", what, allLogs())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitLogs("each replica to work on runs", func() bool {
		return askedGoals() >= 20 && strings.Contains(a.logs.String(), "run claimed") && strings.Contains(b.logs.String(), "run claimed")
	})

	db, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	leases := func() map[string]bot.Lease {
		out := map[string]bot.Lease{}
		var ids []string
		_ = db.View(context.Background(), func(tx bot.Tx) error {
			var err error
			ids, err = tx.RunIDs(bot.RunFilter{})
			return err
		})
		for _, id := range ids {
			if l, err := db.Lease(context.Background(), id); err == nil {
				out[id] = l
			}
		}
		return out
	}
	// b's runs as it is stopped: each must be taken over before b continues.
	a.proc.kill()
	if err := b.proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := map[string]int64{}
	for id, l := range leases() {
		if l.Owner == "rb" {
			stopped[id] = l.Epoch
		}
	}
	if len(stopped) == 0 {
		t.Fatalf("b owned no run when it was stopped; logs:\n%s", allLogs())
	}
	open()
	waitLogs("c to take over b's runs", func() bool {
		now := leases()
		for id, epoch := range stopped {
			if now[id].Epoch <= epoch {
				return false
			}
		}
		return true
	})
	if err := b.proc.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for _, g := range goals {
		wait(t, fake, "the answer to "+g, func() bool { return len(postedText(fake, answerTo(g))) > 0 })
	}
	waitLogs("b to find its late write refused", func() bool {
		return strings.Contains(b.logs.String(), "taken over by another replica")
	})
	b.proc.terminate(25 * time.Second)
	c.proc.terminate(25 * time.Second)

	for _, g := range goals {
		if n := len(postedText(fake, answerTo(g))); n != 1 {
			t.Errorf("the answer to %q was posted %d times, want once", g, n)
		}
	}
	runs := storedRuns(t, db)
	invariants{runs: runs, goals: goals, shown: rf.shown(), logs: allLogs(), secrets: slackSecrets, settled: true}.check(t)
	checkCompleted(t, runs, len(goals))
	for _, r := range runs {
		for _, call := range r.State.Calls {
			if call.Attempts > 1 && call.Name != "list_files" {
				t.Errorf("run %s: call %s (%s) ran %d times", r.ID, call.ID, call.Name, call.Attempts)
			}
		}
	}
	// One leader at a time paces the channel: no two calls to it closer than half the edit
	// interval (the interval counts from the end of a call, so arrivals are further apart
	// unless two replicas sent at once).
	var at []time.Time
	for _, call := range fake.Calls() {
		if (call.Method == "chat.postMessage" || call.Method == "chat.update") && call.Values.Get("channel") == "C1" {
			at = append(at, call.At)
		}
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < 50*time.Millisecond {
			t.Errorf("calls %d and %d to the channel came %s apart, want at least 50ms", i-1, i, gap)
		}
	}
	takenOver := 0
	for _, l := range leases() {
		if l.Epoch > 1 {
			takenOver++
		}
	}
	t.Logf("%d runs, %d of them claimed more than once (taken over, or resumed after a pause); b's runs at its stop: %d", len(runs), takenOver, len(stopped))
	if err := db.Check(t.Context()); err != nil {
		t.Errorf("database check: %v", err)
	}
}

// wait waits for cond on the fake's records, failing the test after slackWait.
func wait(t *testing.T, fake *slackfake.Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), slackWait)
	defer cancel()
	if err := fake.Wait(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// postedText returns the chat.postMessage calls Slack took whose text or blocks contain s.
func postedText(fake *slackfake.Server, s string) []slackfake.Call {
	var out []slackfake.Call
	for _, c := range fake.CallsOf("chat.postMessage") {
		if c.Status == 200 && !c.Injected && strings.Contains(c.Values.Get("text")+c.Values.Get("blocks"), s) {
			out = append(out, c)
		}
	}
	return out
}

// replicaGoals are n goals of their own for the replicas' runs.
func replicaGoals(n int) []string {
	var goals []string
	for i := range n {
		goals = append(goals, fmt.Sprintf("replicated goal %02d", i))
	}
	return goals
}

// gatedModel answers each run of its goals with a list_files call and then answerTo(goal);
// every request waits until open is called, so that runs are caught mid-run.
type gatedModel struct {
	srv  *llmtest.Server
	open func()

	mu    sync.Mutex
	asked map[string]int
}

func newGatedModel(t *testing.T, goals []string) *gatedModel {
	t.Helper()
	gate := make(chan struct{})
	var release sync.Once
	m := &gatedModel{srv: llmtest.NewTest(t), asked: map[string]int{}}
	m.open = func() { release.Do(func() { close(gate) }) }
	t.Cleanup(m.open)
	goalOf := func(r llmtest.Request) string {
		for _, msg := range r.Messages {
			for _, g := range goals {
				if msg.Role == "user" && strings.Contains(msg.Content, g) {
					return g
				}
			}
		}
		return ""
	}
	m.srv.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		g := goalOf(r)
		m.mu.Lock()
		m.asked[g]++
		m.mu.Unlock()
		<-gate
		if r.LastMessage().Role != "tool" {
			return llmtest.ToolCalls(llmtest.Call("list_files", `{"path":"."}`))
		}
		return llmtest.Text(answerTo(g))
	}))
	return m
}

// askedGoals is how many goals the model has been asked about.
func (m *gatedModel) askedGoals() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.asked)
}

// replicaFault is a test's replicas: loopbot processes on one PostgreSQL database, each with
// its Socket Mode connection to one fake Slack, sharing a workspace directory.
type replicaFault struct {
	t     *testing.T
	bin   string
	fake  *slackfake.Server
	url   string
	model *llmtest.Server
	dir   string
	// extra is added to every replica's config file at the end of its [bot] table; it
	// may open tables of its own after its [bot] keys.
	extra string
}

type replicaProc struct {
	id    string
	proc  *loopbotProc
	logs  *logBuffer
	admin string // the admin server's address, for /healthz
}

// start starts replica id with 3s leases and edits paced 100ms apart, and waits for its
// connection, the conns-th the fake has seen.
func (rf *replicaFault) start(id string, conns int) *replicaProc {
	t := rf.t
	t.Helper()
	rdir := filepath.Join(rf.dir, id)
	if err := os.MkdirAll(rdir, 0o700); err != nil {
		t.Fatal(err)
	}
	admin := freeAddr(t)
	cfg := fmt.Sprintf(`[store]
backend = "postgres"
path = %q
[admin]
addr = %q
[web]
addr = %q
[tools]
workspace = %q
[tools.shell]
enabled = false
[log]
level = "debug"
[bot]
edit_interval = "100ms"
replica_id = %q
lease_ttl = "3s"
%s[slack]
api_url = %q
mode = "socket"
`, filepath.Join(rdir, "loopbot.db"), admin, freeAddr(t), filepath.Join(rf.dir, "ws"), id, rf.extra, rf.fake.APIURL())
	path := filepath.Join(rdir, "loopbot.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + rf.dir, "OPENAI_BASE_URL=" + rf.model.URL(), "OPENAI_API_KEY=" + canaryKey,
		"LOOPBOT_DATABASE_URL=" + rf.url, "SLACK_BOT_TOKEN=" + slackBotCanary, "SLACK_APP_TOKEN=" + slackAppCanary}
	r := &replicaProc{id: id, logs: newLogBuffer(), admin: admin}
	r.proc = startLoopbot(t, rf.bin, path, env, r.logs)
	wait(t, rf.fake, fmt.Sprintf("socket mode connection %d", conns), func() bool { return rf.fake.Connections() >= conns })
	return r
}

// mention sends one mention per goal, each the root of its thread in channel C1, and waits
// for their acks.
func (rf *replicaFault) mention(goals []string) {
	t := rf.t
	t.Helper()
	for i, g := range goals {
		ts := fmt.Sprintf("1700001000.%06d", i)
		if err := rf.fake.Send("events_api", fmt.Sprintf("E%02d", i), slackfake.MentionCallback(fmt.Sprintf("Ev%02d", i), "C1", ts, "", "<@"+slackfake.BotUserID+"> "+g)); err != nil {
			t.Fatal(err)
		}
	}
	wait(t, rf.fake, "the acks of every mention", func() bool {
		seen := map[string]bool{}
		for _, x := range rf.fake.Acks() {
			seen[x.EnvelopeID] = true
		}
		return len(seen) >= len(goals)
	})
}

// shown is everything the replicas sent to Slack.
func (rf *replicaFault) shown() []string {
	var shown []string
	for _, call := range rf.fake.Calls() {
		shown = append(shown, call.Values.Get("text"), call.Values.Get("blocks"))
	}
	return shown
}
