package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// testMissingKeys checks that a record without its key is refused, not stored under "".
func testMissingKeys(t *testing.T, su *suite) {
	tests := []struct {
		name string
		put  func(tx bot.Tx) error
	}{
		{"run", func(tx bot.Tx) error { return tx.PutRun(&bot.RunRecord{Status: agent.StatusQueued}) }},
		{"conversation", func(tx bot.Tx) error { return tx.PutConversation(&bot.Conversation{Active: "run-1"}) }},
		{"approval", func(tx bot.Tx) error { return tx.PutApproval(&bot.Approval{RunID: "run-1"}) }},
		{"action", func(tx bot.Tx) error { return tx.PutAction(&bot.Action{Kind: bot.ActionCancel}) }},
		{"outbox item", func(tx bot.Tx) error { return tx.PutOutbox(bot.OutboxItem{Kind: bot.OutboxNotice}) }},
	}
	s := su.open(t)
	for _, tt := range tests {
		if err := s.Update(t.Context(), tt.put); err == nil {
			t.Errorf("put %s without a key: no error", tt.name)
		}
	}
	claims := []struct {
		name string
		id   string
		ttl  time.Duration
	}{
		{"no id", "", time.Minute},
		{"zero ttl", "ev-1", 0},
		{"negative ttl", "ev-1", -time.Minute},
	}
	for _, c := range claims {
		if _, err := s.ClaimEvent(t.Context(), c.id, t0, c.ttl); err == nil {
			t.Errorf("claim event with %s: no error", c.name)
		}
	}
}

// testViewReadOnly checks that every write inside View fails and the error reaches the
// caller.
func testViewReadOnly(t *testing.T, su *suite) {
	tests := []struct {
		name string
		put  func(tx bot.Tx) error
	}{
		{"PutRun", func(tx bot.Tx) error { return tx.PutRun(newRun("run-1", threadA, agent.StatusQueued, t0)) }},
		{"PutConversation", func(tx bot.Tx) error { return tx.PutConversation(&bot.Conversation{Thread: threadA}) }},
		{"PutApproval", func(tx bot.Tx) error { return tx.PutApproval(newApproval("ap-1", "run-1", bot.ApprovalPending, t0)) }},
		{"PutAction", func(tx bot.Tx) error { return tx.PutAction(&bot.Action{ID: "act-1", Kind: bot.ActionStop}) }},
		{"AppendAudit", func(tx bot.Tx) error {
			return tx.AppendAudit(bot.AuditEntry{At: t0, Action: "approve", RunID: "run-1"})
		}},
		{"PutOutbox", func(tx bot.Tx) error { return tx.PutOutbox(bot.OutboxItem{Key: "k", Kind: bot.OutboxNotice}) }},
		{"DeleteOutbox", func(tx bot.Tx) error { return tx.DeleteOutbox("k") }},
	}
	s := su.open(t)
	for _, tt := range tests {
		if err := s.View(t.Context(), tt.put); err == nil {
			t.Errorf("%s inside View: no error", tt.name)
		}
	}
	view(t, s, func(tx bot.Tx) error {
		if _, err := tx.Run("run-1"); !errors.Is(err, bot.ErrNotFound) {
			t.Errorf("run put inside View: got %v, want ErrNotFound", err)
		}
		return nil
	})
}

// testContextCancelled checks that a cancelled context stops every call before it starts.
func testContextCancelled(t *testing.T, su *suite) {
	s := su.open(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	fn := func(bot.Tx) error { called = true; return nil }
	calls := []struct {
		name string
		call func() error
	}{
		{"Update", func() error { return s.Update(ctx, fn) }},
		{"View", func() error { return s.View(ctx, fn) }},
		{"ClaimEvent", func() error { _, err := s.ClaimEvent(ctx, "ev-1", t0, time.Minute); return err }},
		{"PurgeEvents", func() error { _, err := s.PurgeEvents(ctx, t0); return err }},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: got %v, want context.Canceled", c.name, err)
		}
	}
	if called {
		t.Error("a transaction function ran under a cancelled context")
	}
	if first, err := s.ClaimEvent(t.Context(), "ev-1", t0, time.Minute); err != nil || !first {
		t.Errorf("claim after a cancelled claim: got %v, %v; want true", first, err)
	}
}

// writeEverything changes one record of each kind, as a failing step might before it errs.
func writeEverything(tx bot.Tx) error {
	r := newRun("run-1", threadA, agent.StatusRunning, t0)
	return errors.Join(
		tx.PutRun(r),
		tx.PutRun(newRun("run-2", threadA, agent.StatusQueued, t0)),
		tx.PutConversation(&bot.Conversation{Thread: threadA, Runs: []string{"run-1", "run-2"}, Active: "run-2"}),
		tx.PutApproval(newApproval("ap-2", "run-2", bot.ApprovalPending, t0)),
		tx.PutAction(&bot.Action{ID: "act-2", Kind: bot.ActionCancel, RunID: "run-2"}),
		tx.AppendAudit(bot.AuditEntry{At: t0, Action: "approve", RunID: "run-2"}),
		tx.PutOutbox(bot.OutboxItem{Key: "card/run-2", Kind: bot.OutboxCard, RunID: "run-2", Thread: threadA, CreatedAt: t0}),
		tx.DeleteOutbox("card/run-1"),
	)
}

// seedBefore is what the store holds before a transaction that must roll back.
func seedBefore(t *testing.T, s bot.Store) {
	t.Helper()
	update(t, s, func(tx bot.Tx) error {
		return errors.Join(
			tx.PutRun(newRun("run-1", threadA, agent.StatusQueued, t0)),
			tx.PutConversation(&bot.Conversation{Thread: threadA, Runs: []string{"run-1"}, Active: "run-1"}),
			tx.PutOutbox(bot.OutboxItem{Key: "card/run-1", Kind: bot.OutboxCard, RunID: "run-1", Thread: threadA, CreatedAt: t0}),
		)
	})
}

// checkUnchanged checks that the store holds exactly what seedBefore wrote.
func checkUnchanged(t *testing.T, s bot.Store) {
	t.Helper()
	view(t, s, func(tx bot.Tx) error {
		r, err := tx.Run("run-1")
		if err != nil {
			t.Fatalf("run-1 after rollback: %v", err)
		}
		equal(t, "run-1 after rollback", r, newRun("run-1", threadA, agent.StatusQueued, t0))
		c, err := tx.Conversation(threadA)
		if err != nil {
			t.Fatalf("conversation after rollback: %v", err)
		}
		equal(t, "conversation after rollback", c, &bot.Conversation{Thread: threadA, Runs: []string{"run-1"}, Active: "run-1"})
		if _, err := tx.Run("run-2"); !errors.Is(err, bot.ErrNotFound) {
			t.Errorf("run-2 after rollback: got %v, want ErrNotFound", err)
		}
		if _, err := tx.Approval("ap-2"); !errors.Is(err, bot.ErrNotFound) {
			t.Errorf("approval after rollback: got %v, want ErrNotFound", err)
		}
		if _, err := tx.Action("act-2"); !errors.Is(err, bot.ErrNotFound) {
			t.Errorf("action after rollback: got %v, want ErrNotFound", err)
		}
		runs, err := tx.Runs(bot.RunFilter{})
		if err != nil {
			return err
		}
		equal(t, "runs after rollback", ids(runs), []string{"run-1"})
		audit, err := tx.Audit("")
		if err != nil {
			return err
		}
		equal(t, "audit after rollback", len(audit), 0)
		outbox, err := tx.Outbox()
		if err != nil {
			return err
		}
		equal(t, "outbox after rollback", outboxKeys(outbox), []string{"card/run-1="})
		return nil
	})
}

func testRollback(t *testing.T, su *suite) {
	s := su.open(t)
	seedBefore(t, s)
	errStep := errors.New("step failed")
	err := s.Update(t.Context(), func(tx bot.Tx) error {
		if err := writeEverything(tx); err != nil {
			return err
		}
		return errStep
	})
	if !errors.Is(err, errStep) {
		t.Fatalf("Update returned %v, want the function's error", err)
	}
	checkUnchanged(t, s)
}

func testRollbackOnPanic(t *testing.T, su *suite) {
	s := su.open(t)
	seedBefore(t, s)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the function's panic", r)
			}
		}()
		_ = s.Update(t.Context(), func(tx bot.Tx) error {
			if err := writeEverything(tx); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	checkUnchanged(t, s)
	// The store must still take writes after the panic.
	update(t, s, func(tx bot.Tx) error { return tx.PutAction(&bot.Action{ID: "act-3", Kind: bot.ActionStop}) })
}

// race runs fn from n goroutines released at once and returns their errors.
func race(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// winner checks that exactly one of errs is nil and the others are errTaken, and returns
// the index of the nil one.
func winner(t *testing.T, errs []error) int {
	t.Helper()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Errorf("goroutines %d and %d both won", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, errTaken):
			t.Errorf("goroutine %d: %v", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no goroutine won")
	}
	return won
}

// testCASApproval is two people pressing Approve at once, twenty times over: the decision is
// a compare-and-set, so exactly one press counts.
func testCASApproval(t *testing.T, su *suite) {
	s := su.open(t)
	update(t, s, func(tx bot.Tx) error { return tx.PutApproval(newApproval("ap-1", "run-1", bot.ApprovalPending, t0)) })
	ctx := t.Context()
	errs := race(20, func(i int) error {
		return s.Update(ctx, func(tx bot.Tx) error {
			a, err := tx.Approval("ap-1")
			if err != nil {
				return err
			}
			if a.Status != bot.ApprovalPending {
				return errTaken
			}
			a.Status = bot.ApprovalApproved
			a.DecidedBy = bot.User{ID: fmt.Sprintf("U%d", i)}
			a.DecidedAt = t0.Add(time.Duration(i) * time.Second)
			return errors.Join(tx.PutApproval(a), tx.AppendAudit(bot.AuditEntry{At: a.DecidedAt, Actor: a.DecidedBy, Action: "approve", RunID: "run-1", ApprovalID: "ap-1"}))
		})
	})
	won := winner(t, errs)
	view(t, s, func(tx bot.Tx) error {
		a, err := tx.Approval("ap-1")
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("U%d", won); a.Status != bot.ApprovalApproved || a.DecidedBy.ID != want {
			t.Errorf("approval is %s by %q, want approved by %q", a.Status, a.DecidedBy.ID, want)
		}
		audit, err := tx.Audit("run-1")
		if err != nil {
			return err
		}
		if len(audit) != 1 {
			t.Errorf("%d audit entries, want the winner's only", len(audit))
		}
		return nil
	})
}

// testCASConversation is twenty mentions in one idle thread at once: exactly one becomes
// the active run.
func testCASConversation(t *testing.T, su *suite) {
	s := su.open(t)
	update(t, s, func(tx bot.Tx) error { return tx.PutConversation(&bot.Conversation{Thread: threadA}) })
	ctx := t.Context()
	errs := race(20, func(i int) error {
		return s.Update(ctx, func(tx bot.Tx) error {
			c, err := tx.Conversation(threadA)
			if err != nil {
				return err
			}
			if c.Active != "" {
				return errTaken
			}
			id := fmt.Sprintf("run-%d", i)
			c.Active, c.Runs = id, append(c.Runs, id)
			return errors.Join(tx.PutConversation(c), tx.PutRun(newRun(id, threadA, agent.StatusQueued, t0)))
		})
	})
	won := winner(t, errs)
	view(t, s, func(tx bot.Tx) error {
		c, err := tx.Conversation(threadA)
		if err != nil {
			return err
		}
		id := fmt.Sprintf("run-%d", won)
		equal(t, "conversation", c, &bot.Conversation{Thread: threadA, Runs: []string{id}, Active: id})
		runs, err := tx.Runs(bot.RunFilter{})
		if err != nil {
			return err
		}
		equal(t, "runs", ids(runs), []string{id})
		return nil
	})
}

// testNoLostUpdates has twenty writers each append to the same record: serialisable
// transactions keep every append.
func testNoLostUpdates(t *testing.T, su *suite) {
	s := su.open(t)
	update(t, s, func(tx bot.Tx) error { return tx.PutConversation(&bot.Conversation{Thread: threadA}) })
	ctx := t.Context()
	errs := race(20, func(i int) error {
		return s.Update(ctx, func(tx bot.Tx) error {
			c, err := tx.Conversation(threadA)
			if err != nil {
				return err
			}
			c.Queue = append(c.Queue, bot.QueuedGoal{EventID: fmt.Sprintf("ev-%d", i), Text: "more"})
			return tx.PutConversation(c)
		})
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	view(t, s, func(tx bot.Tx) error {
		c, err := tx.Conversation(threadA)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, q := range c.Queue {
			seen[q.EventID] = true
		}
		if len(c.Queue) != 20 || len(seen) != 20 {
			t.Errorf("queue holds %d goals (%d distinct), want 20", len(c.Queue), len(seen))
		}
		return nil
	})
}
