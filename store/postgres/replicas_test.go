package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
	"github.com/loopbot/loopbot/store/storetest"
)

// Two bot.Bot instances on one PostgreSQL database, each through its own pool, as two
// replicas are: run leases, fencing and the outbox's election through the real backend.
// The bots share an injected clock, which the test moves past a lease; the leases' timers
// tick in real time (a third of the 3s lease), and the test waits for what it expects.

type handler struct{ h http.Handler }

func (t handler) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

type testClock struct{ skip atomic.Int64 }

func (c *testClock) Now() time.Time { return time.Now().Add(time.Duration(c.skip.Load())) }

type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// platform counts what a replica posts.
type platform struct{ posts, updates atomic.Int32 }

func (p *platform) Name() string { return "test" }
func (p *platform) Post(ctx context.Context, th bot.ThreadRef, msg bot.Message) (bot.MessageRef, error) {
	return bot.MessageRef{Thread: th, ID: fmt.Sprintf("m%d", p.posts.Add(1))}, nil
}
func (p *platform) Update(ctx context.Context, ref bot.MessageRef, msg bot.Message) error {
	p.updates.Add(1)
	return nil
}
func (p *platform) Notify(ctx context.Context, th bot.ThreadRef, userID, text string) error {
	return nil
}

// charge is a tool with side effects that returns only when released.
type charge struct {
	started chan struct{}
	release chan struct{}
	calls   atomic.Int32
}

func (c *charge) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: "charge", Description: "charges a card",
		Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}}
}
func (c *charge) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskSafe, Reason: "test"}
}
func (c *charge) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	c.calls.Add(1)
	c.started <- struct{}{}
	<-c.release
	return "charged", nil
}

type replica struct {
	db   *storetest.Cut
	bot  *bot.Bot
	plat *platform
	log  *logBuf
}

func startReplica(t *testing.T, id, url string, clk *testClock, srv *llmtest.Server, tools ...agent.Tool) *replica {
	t.Helper()
	return startReplicaTTL(t, id, url, clk, srv, 3*time.Second, tools...)
}

// startReplicaTTL is startReplica with a lease of ttl.
func startReplicaTTL(t *testing.T, id, url string, clk *testClock, srv *llmtest.Server, ttl time.Duration, tools ...agent.Tool) *replica {
	t.Helper()
	r := &replica{db: &storetest.Cut{Replicated: openURL(t, url)}, plat: &platform{}, log: &logBuf{}}
	logger := slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r.bot = startBot(t, id, r.db, r.plat, logger, clk, srv, ttl, tools...)
	return r
}

// startBot starts a bot named id on st, posting to plat, whose model is srv and whose lease
// lasts ttl; the test's cleanup stops it.
func startBot(t *testing.T, id string, st bot.Store, plat bot.Platform, logger *slog.Logger, clk *testClock, srv *llmtest.Server, ttl time.Duration, tools ...agent.Tool) *bot.Bot {
	t.Helper()
	client, err := llm.New(llm.Config{BaseURL: "http://llmtest.invalid/v1", Model: "test-model", MaxRetries: -1},
		llm.WithHTTPClient(&http.Client{Transport: handler{srv}}))
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(agent.Config{MaxSteps: 20}, client, tools)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(bot.Config{ReplicaID: id, LeaseTTL: agent.Duration(ttl)}, st, ag, []bot.Platform{plat}, bot.WithClock(clk.Now), bot.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Stop(ctx); err != nil {
			t.Errorf("stop %s: %v", id, err)
		}
	})
	return b
}

// eventually waits until cond holds, failing the test after 20 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func storedRun(t *testing.T, db bot.Store, id string) *bot.RunRecord {
	t.Helper()
	var rec *bot.RunRecord
	if err := db.View(context.Background(), func(tx bot.Tx) error {
		var err error
		rec, err = tx.Run(id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestReplicasTakeOverAndFence: replica a's run calls a tool with side effects and a stops
// renewing; b takes the run over at epoch 2, reports the call as of unknown outcome without
// running it again, and completes the run. a's late checkpoint of the call's result is
// refused and a stops. The outbox is sent by one replica at a time.
func TestReplicasTakeOverAndFence(t *testing.T) {
	url := pgtest.URL(t)
	clk := &testClock{}
	tool := &charge{started: make(chan struct{}, 4), release: make(chan struct{})}
	srv := llmtest.New(llmtest.ToolCalls(llmtest.Call("charge", `{"q":"10 EUR"}`)))
	gate := make(chan struct{})
	srv.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		<-gate
		return llmtest.Text("Done; check the charge.")
	}))
	a := startReplica(t, "a", url, clk, srv, tool)
	thread := bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}
	res, err := a.bot.Handle(t.Context(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: bot.User{ID: "U1", Name: "ann"}, Text: "charge 10 EUR"})
	if err != nil {
		t.Fatal(err)
	}
	<-tool.started
	if l, err := a.db.Lease(t.Context(), res.RunID); err != nil || l.Owner != "a" || l.Epoch != 1 {
		t.Fatalf("lease while a works = %+v, %v; want a's at epoch 1", l, err)
	}

	a.db.Set(true)
	clk.skip.Add(int64(4 * time.Second))
	b := startReplica(t, "b", url, clk, srv, tool)
	eventually(t, "b to take the run over", func() bool {
		l, err := b.db.Lease(t.Context(), res.RunID)
		return err == nil && l.Owner == "b" && l.Epoch == 2
	})
	eventually(t, "b to store the call as of unknown outcome", func() bool {
		return storedRun(t, b.db, res.RunID).State.Calls[0].Status == agent.CallUnknown
	})

	close(tool.release)
	eventually(t, "a to stop as taken over", func() bool { return strings.Contains(a.log.String(), "taken over by another replica") })
	if c := storedRun(t, b.db, res.RunID).State.Calls[0]; c.Status != agent.CallUnknown {
		t.Errorf("after a's late write the call is %s, want unknown", c.Status)
	}
	close(gate)
	eventually(t, "the run to complete", func() bool { return storedRun(t, b.db, res.RunID).Status == agent.StatusCompleted })
	if n := tool.calls.Load(); n != 1 {
		t.Errorf("charge ran %d times, want once", n)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("the model was asked %d times, want 2", n)
	}
	eventually(t, "the outbox to empty", func() bool {
		var n int
		_ = b.db.View(context.Background(), func(tx bot.Tx) error {
			items, err := tx.Outbox()
			n = len(items)
			return err
		})
		return n == 0
	})
	// a led the outbox until it was cut off; b took it over once a's leadership lapsed.
	if b.plat.posts.Load() == 0 || !strings.Contains(b.log.String(), "this replica leads") {
		t.Errorf("b posted %d messages and its log says:\n%s\nwant b to lead the outbox after a", b.plat.posts.Load(), b.log.String())
	}
}
