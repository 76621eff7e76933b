package postgres_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// quietTTL is the lease of the replicas in these tests: its third, the heartbeat's and the
// outbox poll's interval, is far beyond the time eventually waits, so what the tests see
// came through a notification.
const quietTTL = 10 * time.Minute

// next returns the next notification from ch, failing the test after 20 seconds.
func next(t *testing.T, ch <-chan bot.Notification) bot.Notification {
	t.Helper()
	select {
	case n, ok := <-ch:
		if !ok {
			t.Fatal("listener closed")
		}
		return n
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for a notification")
	}
	return bot.Notification{}
}

// TestNotifyReachesAnotherHandle: a notification sent through one pool reaches a listener
// on another, after the empty one on each channel that a new listener gets first.
func TestNotifyReachesAnotherHandle(t *testing.T) {
	url := pgtest.URL(t)
	a, b := openURL(t, url), openURL(t, url)
	ctx, cancel := context.WithCancel(t.Context())
	ch := a.Listen(ctx, "loopbot_x", "loopbot_y")
	for _, want := range []string{"loopbot_x", "loopbot_y"} {
		if n := next(t, ch); n != (bot.Notification{Channel: want}) {
			t.Fatalf("first notifications: got %+v, want an empty one on %s", n, want)
		}
	}
	if err := b.Notify(t.Context(), "loopbot_y", "run-1"); err != nil {
		t.Fatal(err)
	}
	if n := next(t, ch); n != (bot.Notification{Channel: "loopbot_y", Payload: "run-1"}) {
		t.Errorf("got %+v, want run-1 on loopbot_y", n)
	}
	cancel()
	for range ch {
	}
}

// blocker is a tool that works until its context ends, and says why it ended.
type blocker struct {
	started chan struct{}
	ended   chan error
}

func (b *blocker) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{Name: "wait", Description: "waits",
		Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}
}
func (b *blocker) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskSafe, Reason: "test"}
}
func (b *blocker) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	b.ended <- context.Cause(ctx)
	return "", context.Cause(ctx)
}

// TestCancelNotifiedAcrossReplicas: replica b cancels a run that replica a works on; a
// stops it through b's notification, long before its heartbeat (a third of a 10-minute
// lease) would find the run ended.
func TestCancelNotifiedAcrossReplicas(t *testing.T) {
	url := pgtest.URL(t)
	clk := &testClock{}
	tool := &blocker{started: make(chan struct{}, 1), ended: make(chan error, 1)}
	srv := llmtest.New(llmtest.ToolCalls(llmtest.Call("wait", `{}`)))
	srv.SetFallback(llmtest.Text("Done."))
	a := startReplicaTTL(t, "a", url, clk, srv, quietTTL, tool)
	thread := bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}
	ann := bot.User{ID: "U1", Name: "ann"}
	res, err := a.bot.Handle(t.Context(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: ann, Text: "wait"})
	if err != nil {
		t.Fatal(err)
	}
	<-tool.started
	if l, err := a.db.Lease(t.Context(), res.RunID); err != nil || l.Owner != "a" {
		t.Fatalf("lease while the tool works = %+v, %v; want a's", l, err)
	}
	// b starts once a works on the run, which it would otherwise claim as soon as a.
	b := startReplicaTTL(t, "b", url, clk, srv, quietTTL, tool)
	if _, err := b.bot.Handle(t.Context(), bot.Event{ID: "ev-2", Kind: bot.EventReply, Thread: thread, User: ann, Text: "stop"}); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-tool.ended:
		if cause != agent.ErrCancelled {
			t.Errorf("the tool's context ended with %v, want the cancel", cause)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("a's tool still runs 20s after b's cancel; a's log:\n%s", a.log.String())
	}
	if !strings.Contains(a.log.String(), "run ended elsewhere") {
		t.Errorf("a's log does not say the run ended elsewhere:\n%s", a.log.String())
	}
	eventually(t, "a to release the lease", func() bool {
		l, err := a.db.Lease(t.Context(), res.RunID)
		return err == nil && l.Owner == ""
	})
	if rec := storedRun(t, a.db, res.RunID); rec.Status != agent.StatusCancelled {
		t.Errorf("run is %s, want cancelled", rec.Status)
	}
}

// TestOutboxNotifiedAcrossReplicas: replica b, which does not lead, works on a run and
// writes its answer; the leader a sends it, long before its poll of the outbox (a third of
// a 10-minute lease) would find it.
func TestOutboxNotifiedAcrossReplicas(t *testing.T) {
	url := pgtest.URL(t)
	clk := &testClock{}
	srv := llmtest.New()
	srv.SetFallback(llmtest.Text("Hello."))
	a := startReplicaTTL(t, "a", url, clk, srv, quietTTL)
	b := startReplicaTTL(t, "b", url, clk, srv, quietTTL)
	thread := bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}
	res, err := b.bot.Handle(t.Context(), bot.Event{ID: "ev-1", Kind: bot.EventMention, Thread: thread, User: bot.User{ID: "U1", Name: "ann"}, Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to complete", func() bool { return storedRun(t, b.db, res.RunID).Status == agent.StatusCompleted })
	eventually(t, "the leader a to empty the outbox", func() bool {
		var n int
		_ = a.db.View(context.Background(), func(tx bot.Tx) error {
			items, err := tx.Outbox()
			n = len(items)
			return err
		})
		return n == 0
	})
	if a.plat.posts.Load() == 0 || b.plat.posts.Load() != 0 || b.plat.updates.Load() != 0 {
		t.Errorf("a posted %d, b posted %d and updated %d; want the leader a alone to send", a.plat.posts.Load(), b.plat.posts.Load(), b.plat.updates.Load())
	}
}

// TestListenAgainAfterRestart restarts PostgreSQL under a listener: it connects again,
// says so with an empty notification (those sent meanwhile are lost), and hears the next.
func TestListenAgainAfterRestart(t *testing.T) {
	c := pgtest.NewCluster(t)
	url := c.Database(t)
	a, b := openURL(t, url), openURL(t, url)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := a.Listen(ctx, "loopbot_x")
	if n := next(t, ch); n != (bot.Notification{Channel: "loopbot_x"}) {
		t.Fatalf("first notification: got %+v, want an empty one", n)
	}
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	if n := next(t, ch); n != (bot.Notification{Channel: "loopbot_x"}) {
		t.Fatalf("after the restart: got %+v, want an empty one (connected again)", n)
	}
	// b's pool may hand out a connection the restart broke first.
	eventually(t, "b to notify", func() bool { return b.Notify(t.Context(), "loopbot_x", "after") == nil })
	if n := next(t, ch); n != (bot.Notification{Channel: "loopbot_x", Payload: "after"}) {
		t.Errorf("got %+v, want the notification sent after the restart", n)
	}
}
