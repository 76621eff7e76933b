package bot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
	"github.com/loopbot/loopbot/store/storetest"
)

// Replicas in these tests are bots sharing one bbolt handle, each with its replica ID, its
// own platform recorder and its own log: as far as the bot can tell, processes sharing a
// database. They share the clock, which a test moves past a lease's time.

// logBuffer is a log a test reads while the bot writes it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) has(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Contains(b.buf.String(), s)
}

type replica struct {
	id    string
	bot   *bot.Bot
	store *storetest.Cut
	plat  *recorder
	log   *logBuffer
}

// newReplica starts a bot named id on db. It must live in a synctest bubble.
func newReplica(t *testing.T, id string, db *store.DB, clk *clock, m *model, tools ...agent.Tool) *replica {
	t.Helper()
	return newReplicaWith(t, bot.Config{}, id, db, clk, m, tools...)
}

// newReplicaWith is newReplica with cfg, whose ReplicaID and EditInterval it sets.
func newReplicaWith(t *testing.T, cfg bot.Config, id string, db *store.DB, clk *clock, m *model, tools ...agent.Tool) *replica {
	t.Helper()
	ag, err := agent.New(agent.Config{MaxSteps: 50, NoProgressSteps: noProgressOff}, m.client, tools)
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{id: id, store: &storetest.Cut{Replicated: db}, plat: &recorder{}, log: &logBuffer{}}
	logger := slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.ReplicaID, cfg.EditInterval = id, agent.Duration(time.Second)
	r.bot, err = bot.New(cfg, r.store, ag, []bot.Platform{r.plat}, bot.WithClock(clk.Now), bot.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.bot.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.bot.Stop(context.Background()); err != nil {
			t.Errorf("stop replica %s: %v", id, err)
		}
	})
	return r
}

func openStore(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "bot.db"))
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs after the replicas' Stops.
	t.Cleanup(func() {
		if err := db.Check(context.Background()); err != nil {
			t.Errorf("store check: %v", err)
		}
		db.Close()
	})
	return db
}

// gateTool is a tool with side effects (not idempotent) that tells when it starts and
// returns only when released, whatever its context says: a payment that went through.
type gateTool struct {
	name    string
	started chan struct{}
	release chan struct{}
	calls   atomic.Int32
	keys    chan string // the idempotency key of each call
}

func newGateTool(name string) *gateTool {
	return &gateTool{name: name, started: make(chan struct{}, 8), release: make(chan struct{}), keys: make(chan string, 8)}
}

func (g *gateTool) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: g.name, Description: "charges a card",
		Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}}
}

func (g *gateTool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskSafe, Reason: "the test says safe"}
}

func (g *gateTool) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	g.calls.Add(1)
	g.keys <- inv.IdempotencyKey()
	g.started <- struct{}{}
	<-g.release
	return "charged", nil
}

func leaseOf(t *testing.T, db *store.DB, runID string) bot.Lease {
	t.Helper()
	l, err := db.Lease(context.Background(), runID)
	if err != nil {
		t.Fatalf("lease of %s: %v", runID, err)
	}
	return l
}

func runOf(t *testing.T, db *store.DB, runID string) *bot.RunRecord {
	t.Helper()
	var rec *bot.RunRecord
	if err := db.View(context.Background(), func(tx bot.Tx) error {
		var err error
		rec, err = tx.Run(runID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestTakenOverRunFencesTheStaleReplica pauses replica a while its run's call with side
// effects runs: its lease expires, b takes the run over with the next epoch, reports the
// call's outcome as unknown and does not run it again. When a wakes, its late checkpoint
// is refused by the fence and it stops without writing anything.
func TestTakenOverRunFencesTheStaleReplica(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		clk := &clock{}
		charge := newGateTool("charge")
		m := newModel(t)
		m.add(use("charge", `{"q":"10 EUR"}`))
		gate := make(chan struct{})
		m.srv.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
			<-gate
			return say("Done, but check the charge.")
		}))
		a := newReplica(t, "a", db, clk, m, charge)
		res, err := a.bot.Handle(context.Background(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "charge 10 EUR"})
		if err != nil {
			t.Fatal(err)
		}
		<-charge.started
		if key := <-charge.keys; key != res.RunID+"/"+runOf(t, db, res.RunID).State.Calls[0].ID {
			t.Errorf("the tool's idempotency key is %q, want run/call", key)
		}
		if l := leaseOf(t, db, res.RunID); l.Owner != "a" || l.Epoch != 1 {
			t.Fatalf("lease while a works = %+v, want a's at epoch 1", l)
		}

		// a stops renewing (paused, partitioned) and its lease runs out.
		a.store.Set(true)
		clk.Advance(31 * time.Second)
		b := newReplica(t, "b", db, clk, m, charge)
		synctest.Wait()
		if l := leaseOf(t, db, res.RunID); l.Owner != "b" || l.Epoch != 2 {
			t.Fatalf("lease after a's expired = %+v, want b's at epoch 2", l)
		}
		if c := runOf(t, db, res.RunID).State.Calls[0]; c.Status != agent.CallUnknown {
			t.Errorf("the call b found started is %s, want %s", c.Status, agent.CallUnknown)
		}

		// a wakes: its call returns, and its checkpoint of the result is refused.
		close(charge.release)
		synctest.Wait()
		if !a.log.has("taken over by another replica") {
			t.Errorf("a did not stop as taken over; its log:\n%s", a.log.buf.String())
		}
		// A refused fenced write is no save a waits for: a's health check stays good.
		if err := a.bot.SaveError(); err != nil {
			t.Errorf("a's SaveError after its fenced write = %v, want nil", err)
		}
		if c := runOf(t, db, res.RunID).State.Calls[0]; c.Status != agent.CallUnknown {
			t.Errorf("after a's late write the call is %s, want %s as b stored it", c.Status, agent.CallUnknown)
		}

		close(gate)
		synctest.Wait()
		rec := runOf(t, db, res.RunID)
		if rec.Status != agent.StatusCompleted {
			t.Errorf("run is %s, want completed by b", rec.Status)
		}
		if n := charge.calls.Load(); n != 1 {
			t.Errorf("charge ran %d times, want once", n)
		}
		if n := len(m.requests()); n != 2 {
			t.Errorf("the model was asked %d times, want 2 (a's first step, b's after the takeover)", n)
		}
		if l := leaseOf(t, db, res.RunID); l.Owner != "" || l.Epoch != 2 {
			t.Errorf("lease after the run completed = %+v, want released at epoch 2", l)
		}
		_ = b
	})
}

// TestHeartbeatKeepsTheLease lets a working replica's heartbeat renew its lease past the
// time it was first given: another replica started after that time claims nothing.
func TestHeartbeatKeepsTheLease(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		clk := &clock{}
		charge := newGateTool("charge")
		m := newModel(t)
		m.add(use("charge", `{}`), say("Charged."))
		a := newReplica(t, "a", db, clk, m, charge)
		res, err := a.bot.Handle(context.Background(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "charge"})
		if err != nil {
			t.Fatal(err)
		}
		<-charge.started
		first := leaseOf(t, db, res.RunID)
		clk.Advance(15 * time.Second)
		time.Sleep(10 * time.Second) // a's heartbeat
		synctest.Wait()
		renewed := leaseOf(t, db, res.RunID)
		if renewed.Epoch != first.Epoch || !renewed.Expires.After(first.Expires) {
			t.Fatalf("lease after a heartbeat = %+v, want %+v renewed", renewed, first)
		}
		clk.Advance(20 * time.Second) // past the first expiry, not the renewed one
		newReplica(t, "b", db, clk, m, charge)
		synctest.Wait()
		if l := leaseOf(t, db, res.RunID); l.Owner != "a" || l.Epoch != first.Epoch {
			t.Errorf("lease after b started = %+v, want a's still", l)
		}
		close(charge.release)
		synctest.Wait()
		if rec := runOf(t, db, res.RunID); rec.Status != agent.StatusCompleted || charge.calls.Load() != 1 {
			t.Errorf("run is %s after %d calls, want completed after 1", rec.Status, charge.calls.Load())
		}
	})
}

// blockedOnA starts replica a on a new store, has it start a run whose tool blocks until its
// context ends, and starts replica b beside it on the same store and clock.
func blockedOnA(t *testing.T) (db *store.DB, a, b *replica, res bot.Result) {
	t.Helper()
	db = openStore(t)
	clk := &clock{}
	slow := &tool{name: "slow", risk: agent.RiskSafe, block: true}
	m := newModel(t)
	m.add(use("slow", `{}`))
	a = newReplica(t, "a", db, clk, m, slow)
	res, err := a.bot.Handle(context.Background(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "wait"})
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	if slow.calls.Load() != 1 {
		t.Fatalf("slow ran %d times, want it running", slow.calls.Load())
	}
	b = newReplica(t, "b", db, clk, m, slow)
	return db, a, b, res
}

// TestCancelReachesTheOwningReplica cancels, through replica b, a run that replica a works
// on: b writes the cancel to the store, its notification is lost, and a's heartbeat finds
// the run ended and stops its goroutine (the tool's context ends) within a third of the
// lease.
func TestCancelReachesTheOwningReplica(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db, a, b, res := blockedOnA(t)
		b.store.Lose(true) // the heartbeat finds it; notify_test.go tests the notification
		start := time.Now()
		if _, err := b.bot.Handle(context.Background(), bot.Event{ID: "ev-2", Kind: bot.EventReply, Thread: thread, User: ann, Text: "stop"}); err != nil {
			t.Fatal(err)
		}
		if rec := runOf(t, db, res.RunID); rec.Status != agent.StatusCancelled {
			t.Fatalf("run after b's cancel is %s, want cancelled", rec.Status)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if !a.log.has("run ended elsewhere") {
			t.Errorf("a did not notice the cancel within %s; its log:\n%s", time.Since(start), a.log.buf.String())
		}
		wantCancelledAndReleased(t, db, res.RunID)
	})
}

// TestOneReplicaSendsTheOutbox starts two replicas: only the first, the leader, sends the
// outbox, whichever replica wrote it. Once the leader stops renewing, the other takes over
// within the lease's time and the old one sends nothing more.
func TestOneReplicaSendsTheOutbox(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		clk := &clock{}
		m := newModel(t)
		m.srv.SetFallback(say("Hello."))
		a := newReplica(t, "a", db, clk, m)
		b := newReplica(t, "b", db, clk, m)
		ask := func(r *replica, n int) {
			t.Helper()
			th := bot.ThreadRef{Platform: "test", Channel: "C1", Thread: fmt.Sprintf("T%d", n)}
			if _, err := r.bot.Handle(context.Background(), bot.Event{ID: fmt.Sprintf("ev-%d", n), Kind: bot.EventMention, Thread: th, User: ann, Text: "hi"}); err != nil {
				t.Fatal(err)
			}
			// Long enough for the other replica's heartbeat to claim the run, when the
			// one asked cannot.
			time.Sleep(15 * time.Second)
			synctest.Wait()
		}
		ask(b, 1)
		if len(a.plat.sent(bot.KindAnswer)) != 1 || len(b.plat.sent("")) != 0 {
			t.Fatalf("a sent %d answers and b made %d calls, want the leader a to send the one answer", len(a.plat.sent(bot.KindAnswer)), len(b.plat.sent("")))
		}
		a.store.Set(true)
		clk.Advance(31 * time.Second)
		time.Sleep(10 * time.Second) // b's election comes round
		synctest.Wait()
		before := len(a.plat.sent(""))
		ask(a, 2)
		if len(b.plat.sent(bot.KindAnswer)) != 1 || len(a.plat.sent("")) != before {
			t.Errorf("b sent %d answers and a made %d calls more, want the new leader b to send the answer", len(b.plat.sent(bot.KindAnswer)), len(a.plat.sent(""))-before)
		}
		if !b.log.has("this replica leads") {
			t.Errorf("b's log does not say it leads:\n%s", b.log.buf.String())
		}
	})
}

// TestNewLeaderSweepsAtOnce leaves an approval pending past its expiry while its replica,
// the leader, is cut off: the other replica takes the leadership over and expires the
// approval as it does, not at its sweeper's next tick a minute later.
func TestNewLeaderSweepsAtOnce(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		clk := &clock{}
		deploy := &tool{name: "deploy", risk: agent.RiskConfirm, out: "deployed"}
		m := newModel(t)
		m.add(use("deploy", `{}`))
		m.srv.SetFallback(say("Not deployed."))
		a := newReplica(t, "a", db, clk, m, deploy)
		time.Sleep(time.Second) // a leads; b starts after it
		b := newReplica(t, "b", db, clk, m, deploy)
		res, err := a.bot.Handle(context.Background(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "deploy"})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if rec := runOf(t, db, res.RunID); rec.Status != agent.StatusAwaitingApproval {
			t.Fatalf("run is %s, want awaiting approval", rec.Status)
		}
		a.store.Set(true)
		clk.Advance(31 * time.Minute) // past the approval's expiry and a's leadership
		time.Sleep(11 * time.Second)  // b's election comes round, not its sweeper's tick
		synctest.Wait()
		var aps []*bot.Approval
		if err := db.View(context.Background(), func(tx bot.Tx) error {
			var err error
			aps, err = tx.Approvals(res.RunID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(aps) != 1 || aps[0].Status != bot.ApprovalExpired {
			t.Errorf("approvals %+v, want the one expired by b", aps)
		}
		if !b.log.has("this replica leads") || deploy.calls.Load() != 0 {
			t.Errorf("b leads: %v; deploy ran %d times, want never", b.log.has("this replica leads"), deploy.calls.Load())
		}
	})
}

// renewless is a store whose lease renewals fail (a transaction that timed out, say) while
// claims go through.
type renewless struct{ *store.DB }

func (renewless) RenewLease(context.Context, bot.Lease, time.Time, time.Duration) (bot.Lease, error) {
	return bot.Lease{}, errors.New("renew lease: timeout")
}

// TestOwnLapsedLeaseClaimedAgain lets a replica's lease lapse because its renewals fail:
// its next claim takes its own running run again under a new epoch, and the goroutine goes
// on under that lease: the call's result is saved and the run completes, without a second
// goroutine or a second call.
func TestOwnLapsedLeaseClaimedAgain(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		clk := &clock{}
		charge := newGateTool("charge")
		m := newModel(t)
		m.add(use("charge", `{}`), say("Charged."))
		ag, err := agent.New(agent.Config{MaxSteps: 50, NoProgressSteps: noProgressOff}, m.client, []agent.Tool{charge})
		if err != nil {
			t.Fatal(err)
		}
		cfg := bot.Config{ReplicaID: "a", EditInterval: agent.Duration(time.Second)}
		logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError + 1}))
		b, err := bot.New(cfg, renewless{db}, ag, []bot.Platform{&recorder{}}, bot.WithClock(clk.Now), bot.WithLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer b.Stop(context.Background())
		res, err := b.Handle(context.Background(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "charge"})
		if err != nil {
			t.Fatal(err)
		}
		<-charge.started
		clk.Advance(31 * time.Second)
		time.Sleep(10 * time.Second) // the heartbeat: the renewal fails, the claim succeeds
		synctest.Wait()
		if l := leaseOf(t, db, res.RunID); l.Owner != "a" || l.Epoch != 2 {
			t.Fatalf("lease after the lapse = %+v, want a's again at epoch 2", l)
		}
		close(charge.release)
		synctest.Wait()
		rec := runOf(t, db, res.RunID)
		if rec.Status != agent.StatusCompleted || rec.State.Calls[0].Status != agent.CallSucceeded || charge.calls.Load() != 1 {
			t.Errorf("run is %s with its call %s after %d calls, want completed, succeeded, once", rec.Status, rec.State.Calls[0].Status, charge.calls.Load())
		}
	})
}

// wantCancelledAndReleased fails t unless run id is stored as cancelled with its lease given up.
func wantCancelledAndReleased(t *testing.T, db *store.DB, id string) {
	t.Helper()
	if l := leaseOf(t, db, id); l.Owner != "" {
		t.Errorf("lease after the cancel = %+v, want released", l)
	}
	if rec := runOf(t, db, id); rec.Status != agent.StatusCancelled {
		t.Errorf("run is %s, want cancelled", rec.Status)
	}
}
