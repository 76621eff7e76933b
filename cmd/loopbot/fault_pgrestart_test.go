package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loopbot/loopbot/adapters/slack/slackfake"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// chargeTool is the non-idempotent tool of the restart test, as the model sees it: the
// MCP server "pay"'s tool "charge".
const chargeTool = "pay__charge"

// TestFaultPostgresRestartUnderReplicas restarts the PostgreSQL server while two replicas
// write hard: 48 mentions over four channels, each run eight quick model steps (listings and
// three charges on an MCP server, then the answer), so checkpoints, tool intents, outbox
// items, card edits and lease renewals flow when the server goes away. The server stops
// once the store shows runs mid-way, with both replicas in the middle of a charge, and stays
// down until each replica's health check fails and each holds a run whose save failed.
// Then every acknowledged mention has one run, every run completes with its answer posted
// once, no charge ran twice (the MCP server counts them by what they charge and by their
// idempotency keys; a charge reported as outcome unknown is counted, and must have run at
// most once), the checker's invariants hold, and both replicas are healthy and listen again.
func TestFaultPostgresRestartUnderReplicas(t *testing.T) {
	cluster := pgtest.NewCluster(t)
	url := cluster.Database(t)
	bin := loopbotBinary(t)
	fake, err := slackfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	pay := newChargeServer(t)

	goals := replicaGoals(48)
	model := llmtest.NewTest(t)
	var asked atomic.Int64
	model.SetFallback(llmtest.Func(chargingRun(goals, &asked)))
	rf := &replicaFault{t: t, bin: bin, fake: fake, url: url, model: model, dir: t.TempDir(), extra: fmt.Sprintf(`max_concurrent_runs = 6
[[mcp.servers]]
name = "pay"
url = %q
trusted = true
tool_risk = { charge = "safe" }
`, pay.URL)}
	a, b := rf.start("ra", 1), rf.start("rb", 2)
	logs := func() string { return a.logs.String() + b.logs.String() }

	db, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// progress reads the runs as the replicas left them: how many are mid-way (a step
	// checkpointed, not ended) and when the last of them was saved. A read that fails
	// (the server is down) reports -1.
	progress := func() (midway int, saved time.Time) {
		var runs []*bot.RunRecord
		if err := db.View(context.Background(), func(tx bot.Tx) error {
			var err error
			runs, err = tx.Runs(bot.RunFilter{})
			return err
		}); err != nil {
			return -1, time.Time{}
		}
		for _, r := range runs {
			if r.UpdatedAt.After(saved) {
				saved = r.UpdatedAt
			}
			if r.State.Step > 0 && !r.Status.Terminal() {
				midway++
			}
		}
		return midway, saved
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(slackWait)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; logs:\n%s", what, logs())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// Every replica listens for notifications on connections of their own; after the
	// restart as many must listen again.
	var listening int
	waitFor("the replicas to listen", func() bool {
		listening = listeners(t, url)
		return listening >= 2
	})
	mentionChannels(t, fake, goals, 4)
	// Once the load is under way (by the model's count, without reading the store in a
	// loop), the charge server holds the second charge of every other goal: when seven are
	// held, both replicas (six slots each) have a run in the middle of a call, and the
	// store must show them mid-way; the others go on writing as the server goes away. The
	// held charges are let go once it is down, so their results' saves fail.
	var midway int
	waitFor("a fifth of the model's answers", func() bool { return asked.Load() >= int64(len(goals)*runSteps/5) })
	pay.hold()
	waitFor("seven charges held", func() bool { return pay.held() >= 7 })
	waitFor("runs mid-way in the store", func() bool {
		midway, _ = progress()
		return midway >= 7
	})
	// The server stays down until both replicas' health checks say so and each holds a run
	// whose save failed: longer than a transaction's retries last (store/postgres backs
	// off up to about 0.75s), so the replicas must come back by themselves once it is up.
	stoppedAt := time.Now()
	cluster.Stop()
	gated := pay.held()
	pay.open()
	for _, r := range []*replicaProc{a, b} {
		waitFor(r.id+"'s health check to fail", func() bool { return healthz(r.admin) != nil })
		waitFor(r.id+" to hold a run whose save failed", func() bool { return strings.Contains(r.logs.String(), "run could not be saved") })
	}
	down := time.Since(stoppedAt)
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	waitFor("a run saved after the restart", func() bool {
		_, saved := progress()
		return saved.After(started)
	})
	reconnect := time.Since(started)
	for _, r := range []*replicaProc{a, b} {
		// The last answer is in the failure's message: a health check that does not pass
		// again says why.
		last := ""
		waitFor(r.id+"'s health check to pass again", func() bool {
			err := healthz(r.admin)
			if err != nil && err.Error() != last {
				last = err.Error()
				t.Logf("%s /healthz: %s", r.id, last)
			}
			return err == nil
		})
	}
	healthy := time.Since(started)
	waitFor(fmt.Sprintf("%d connections to listen again", listening), func() bool { return listeners(t, url) == listening })
	relisten := time.Since(started)

	for _, g := range goals {
		waitFor("the answer to "+g, func() bool { return len(postedText(fake, answerTo(g))) > 0 })
	}
	a.proc.terminate(25 * time.Second)
	b.proc.terminate(25 * time.Second)
	for _, g := range goals {
		if n := len(postedText(fake, answerTo(g))); n != 1 {
			t.Errorf("the answer to %q was posted %d times, want once", g, n)
		}
	}
	held := strings.Count(logs(), "run could not be saved")
	runs := storedRuns(t, db)
	invariants{runs: runs, goals: goals, shown: rf.shown(), logs: logs(), secrets: slackSecrets, settled: true}.check(t)
	checkCompleted(t, runs, len(goals))
	unknown, unknownRan := pay.check(t, runs, goals)
	if err := db.Check(t.Context()); err != nil {
		t.Errorf("database check: %v", err)
	}
	if !strings.Contains(logs(), "held run: the store takes writes again; resuming") && held > 0 {
		t.Errorf("%d runs were held by failed saves, and none resumed; logs:\n%s", held, logs())
	}
	t.Logf("%d runs; %d mid-way when the server went down for %s, %d of them in a charge; %d held by a failed save; both replicas healthy %s after it was up, listening again after %s, a run saved after %s; %d charges ran, %d reported as outcome unknown (%d of them had run)",
		len(runs), midway, down.Round(time.Millisecond), gated, held, healthy.Round(time.Millisecond), relisten.Round(time.Millisecond), reconnect.Round(time.Millisecond), pay.total(), unknown, unknownRan)
}

// listeners counts the sessions on url's database that listen for notifications: idle after
// a LISTEN.
func listeners(t *testing.T, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return -1
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state = 'idle' AND query LIKE 'LISTEN %'`).Scan(&n); err != nil {
		return -1
	}
	return n
}

// healthz asks a replica's admin server whether it is healthy (its database answers and
// takes writes).
func healthz(addr string) error {
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return fmt.Errorf("healthz: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// mentionChannels sends one mention per goal, spread over channels C1..Cn so that the
// per-channel pacing of edits does not set the test's pace, and waits for their acks.
func mentionChannels(t *testing.T, fake *slackfake.Server, goals []string, n int) {
	t.Helper()
	for i, g := range goals {
		ts := fmt.Sprintf("1700002000.%06d", i)
		ch := fmt.Sprintf("C%d", 1+i%n)
		if err := fake.Send("events_api", fmt.Sprintf("E%02d", i), slackfake.MentionCallback(fmt.Sprintf("Ev%02d", i), ch, ts, "", "<@"+slackfake.BotUserID+"> "+g)); err != nil {
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
}

// runSteps is how many model calls a run of chargingRun makes.
const runSteps = 8

// chargingRun is the model of the restart test: by the tool results a run has so far, it
// lists files and charges by turns (three charges) and answers at its eighth call. It counts
// the requests it answers in asked.
func chargingRun(goals []string, asked *atomic.Int64) func(llmtest.Request) llmtest.Step {
	return func(r llmtest.Request) llmtest.Step {
		asked.Add(1)
		goal, results := "", 0
		for _, msg := range r.Messages {
			switch msg.Role {
			case "user":
				for _, g := range goals {
					if strings.Contains(msg.Content, g) {
						goal = g
					}
				}
			case "tool":
				results++
			}
		}
		switch {
		case results >= runSteps-1:
			return llmtest.Text(answerTo(goal))
		case results%2 == 0:
			return llmtest.ToolCalls(llmtest.Call("list_files", `{"path":"."}`))
		}
		return llmtest.ToolCalls(llmtest.Call(chargeTool, fmt.Sprintf(`{"goal":%q,"n":%d}`, goal, (results+1)/2)))
	}
}

// chargeServer is an MCP server over streamable HTTP whose tool "charge" stands for a
// payment: it counts every charge it runs by what it charges (a goal's first or second)
// and by the idempotency key loopbot passes with it.
type chargeServer struct {
	*httptest.Server

	mu     sync.Mutex
	byWhat map[string]int
	byKey  map[string]int
	// Once holding is set, the second charge of every other goal (goals 00, 02, ...)
	// waits for gate to close; waiting counts them.
	holding bool
	waiting int
	gate    chan struct{}
	release sync.Once
}

type chargeArgs struct {
	Goal string `json:"goal"`
	N    int    `json:"n"`
}

func newChargeServer(t *testing.T) *chargeServer {
	t.Helper()
	c := &chargeServer{byWhat: map[string]int{}, byKey: map[string]int{}, gate: make(chan struct{})}
	t.Cleanup(c.open)
	s := mcp.NewServer(&mcp.Implementation{Name: "pay", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "charge", Description: "Charge a goal's customer once."},
		func(ctx context.Context, req *mcp.CallToolRequest, in chargeArgs) (*mcp.CallToolResult, any, error) {
			key, _ := req.Params.Meta["loopbot/idempotency-key"].(string)
			c.mu.Lock()
			even := strings.HasSuffix(in.Goal, "0") || strings.HasSuffix(in.Goal, "2") || strings.HasSuffix(in.Goal, "4") ||
				strings.HasSuffix(in.Goal, "6") || strings.HasSuffix(in.Goal, "8")
			wait := c.holding && in.N == 2 && even
			if wait {
				c.waiting++
			}
			c.mu.Unlock()
			if wait {
				<-c.gate
			}
			c.mu.Lock()
			c.byWhat[fmt.Sprintf("%s #%d", in.Goal, in.N)]++
			c.byKey[key]++
			c.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "charged"}}}, nil, nil
		})
	c.Server = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(c.Close)
	return c
}

// hold makes the second charge of every other goal wait until open is called.
func (c *chargeServer) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = true
}

// held is how many charges have waited.
func (c *chargeServer) held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting
}

// open lets the held charges go, and holds no more.
func (c *chargeServer) open() {
	c.mu.Lock()
	c.holding = false
	c.mu.Unlock()
	c.release.Do(func() { close(c.gate) })
}

// total is how many charges ran.
func (c *chargeServer) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.byWhat {
		n += v
	}
	return n
}

// check asserts that every goal was charged three times, each charge once, under the keys of the
// runs' succeeded or outcome-unknown charge calls, and returns how many were reported as
// outcome unknown and how many of those had run.
func (c *chargeServer) check(t *testing.T, runs []*bot.RunRecord, goals []string) (unknown, unknownRan int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range goals {
		for n := 1; n <= runSteps/2-1; n++ {
			if got := c.byWhat[fmt.Sprintf("%s #%d", g, n)]; got != 1 {
				t.Errorf("charge #%d of %q ran %d times, want once", n, g, got)
			}
		}
	}
	known := map[string]bool{}
	for _, r := range runs {
		for _, call := range r.State.Calls {
			if call.Name != chargeTool {
				continue
			}
			key := r.ID + "/" + call.ID
			known[key] = true
			switch {
			case call.Attempts > 1:
				t.Errorf("run %s: charge %s was started %d times", r.ID, call.ID, call.Attempts)
			case call.Status == agent.CallUnknown:
				unknown++
				unknownRan += c.byKey[key]
				if c.byKey[key] > 1 {
					t.Errorf("run %s: charge %s (outcome unknown) ran %d times", r.ID, call.ID, c.byKey[key])
				}
			case call.Status == agent.CallSucceeded && c.byKey[key] != 1:
				t.Errorf("run %s: charge %s succeeded but ran %d times", r.ID, call.ID, c.byKey[key])
			}
		}
	}
	for key, n := range c.byKey {
		if !known[key] {
			t.Errorf("a charge ran %d times under key %q, which no run's call has", n, key)
		}
	}
	return unknown, unknownRan
}
