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

	var goals []string
	for i := range 30 {
		goals = append(goals, fmt.Sprintf("replicated goal %02d", i))
	}
	gate := make(chan struct{})
	var release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	model := llmtest.NewTest(t)
	t.Cleanup(open)
	var mu sync.Mutex
	asked := map[string]int{}
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
	model.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		g := goalOf(r)
		mu.Lock()
		asked[g]++
		mu.Unlock()
		<-gate
		if r.LastMessage().Role != "tool" {
			return llmtest.ToolCalls(llmtest.Call("list_files", `{"path":"."}`))
		}
		return llmtest.Text(answerTo(g))
	}))
	askedGoals := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(asked)
	}

	dir := t.TempDir()
	env := []string{"HOME=" + dir, "OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=" + canaryKey,
		"LOOPBOT_DATABASE_URL=" + url, "SLACK_BOT_TOKEN=" + slackBotCanary, "SLACK_APP_TOKEN=" + slackAppCanary}
	type replica struct {
		id   string
		proc *loopbotProc
		logs *logBuffer
	}
	start := func(id string, conns int) *replica {
		t.Helper()
		rdir := filepath.Join(dir, id)
		if err := os.MkdirAll(rdir, 0o700); err != nil {
			t.Fatal(err)
		}
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
[slack]
api_url = %q
mode = "socket"
`, filepath.Join(rdir, "loopbot.db"), freeAddr(t), freeAddr(t), filepath.Join(dir, "ws"), id, fake.APIURL())
		path := filepath.Join(rdir, "loopbot.toml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		r := &replica{id: id, logs: newLogBuffer()}
		r.proc = startLoopbot(t, bin, path, env, r.logs)
		wait(t, fake, fmt.Sprintf("socket mode connection %d", conns), func() bool { return fake.Connections() >= conns })
		return r
	}
	a, b, c := start("ra", 1), start("rb", 2), start("rc", 3)
	allLogs := func() string { return a.logs.String() + b.logs.String() + c.logs.String() }

	// The fake delivers on its newest connection: c receives every mention, and the runs
	// are spread by the replicas' claims.
	for i, g := range goals {
		ts := fmt.Sprintf("1700001000.%06d", i)
		if err := fake.Send("events_api", fmt.Sprintf("E%02d", i), slackfake.MentionCallback(fmt.Sprintf("Ev%02d", i), "C1", ts, "", "<@"+slackfake.BotUserID+"> "+g)); err != nil {
			t.Fatal(err)
		}
	}
	wait(t, fake, "the acks of every mention", func() bool {
		seen := map[string]bool{}
		for _, x := range fake.Acks() {
			seen[x.EnvelopeID] = true
		}
		return len(seen) >= len(goals)
	})
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
	var runs []*bot.RunRecord
	if err := db.View(t.Context(), func(tx bot.Tx) error {
		var err error
		runs, err = tx.Runs(bot.RunFilter{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, call := range fake.Calls() {
		shown = append(shown, call.Values.Get("text"), call.Values.Get("blocks"))
	}
	invariants{runs: runs, goals: goals, shown: shown, logs: allLogs(), secrets: slackSecrets, settled: true}.check(t)
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
