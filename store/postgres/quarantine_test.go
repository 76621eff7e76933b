package postgres

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// TestQuarantine writes records that do not decode straight into each quarantinable table,
// beside good ones: getters treat them as absent, lists skip them, and afterwards they sit
// in the quarantine table and the hook has heard of each; the good records are untouched.
func TestQuarantine(t *testing.T) {
	var mu sync.Mutex
	var heard []string
	db, err := Open(t.Context(), pgtest.URL(t), WithQuarantineHook(func(q Quarantined) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, q.Bucket+"/"+q.Key)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	thread := bot.ThreadRef{Platform: "slack", Channel: "C1", Thread: "1"}
	err = db.Update(t.Context(), func(tx bot.Tx) error {
		return errors.Join(
			tx.PutOutbox(bot.OutboxItem{Key: "good", Kind: bot.OutboxNotice, Thread: thread, CreatedAt: t0}),
			tx.PutApproval(&bot.Approval{ID: "ap-good", RunID: "run-1", Risk: agent.RiskDangerous, Status: bot.ApprovalPending, CreatedAt: t0}),
			tx.AppendAudit(bot.AuditEntry{At: t0, Action: "approve", RunID: "run-1", Detail: "good"}),
		)
	})
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{
		"INSERT INTO outbox (key, data) VALUES ('bad', '{\"key\": 7')",
		"INSERT INTO approvals (id, run_id, status, data) VALUES ('ap-bad', 'run-1', 'pending', 'not json')",
		"INSERT INTO audit (at_ns, run_id, data) VALUES (0, 'run-1', '[1,2')",
		"INSERT INTO records (bucket, key, data) VALUES ('actions', 'act-bad', '{\"kind\": []}')",
	}
	for _, sql := range bad {
		if _, err := db.pool.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Check(t.Context()); err == nil {
		t.Error("Check passed a database with records that are not JSON")
	}
	err = db.View(t.Context(), func(tx bot.Tx) error {
		items, err := tx.Outbox()
		if err != nil || len(items) != 1 || items[0].Key != "good" {
			t.Errorf("outbox = %+v, %v; want the good item alone", items, err)
		}
		aps, err := tx.Approvals("run-1")
		if err != nil || len(aps) != 1 || aps[0].ID != "ap-good" {
			t.Errorf("approvals = %+v, %v; want the good one alone", aps, err)
		}
		audit, err := tx.Audit("")
		if err != nil || len(audit) != 1 || audit[0].Detail != "good" {
			t.Errorf("audit = %+v, %v; want the good entry alone", audit, err)
		}
		if _, err := tx.Action("act-bad"); !errors.Is(err, bot.ErrNotFound) || !strings.Contains(err.Error(), "quarantined") {
			t.Errorf("undecodable action: got %v, want ErrNotFound, quarantined", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := db.QuarantineCount(context.Background()); err != nil || n != 4 {
		t.Errorf("quarantine holds %d, %v; want 4", n, err)
	}
	mu.Lock()
	if len(heard) != 4 {
		t.Errorf("hook heard %v, want the 4 records", heard)
	}
	mu.Unlock()
	if err := db.Check(t.Context()); err != nil {
		t.Errorf("Check after the quarantine: %v", err)
	}
}

// TestCheckFindsBrokenItems removes an item from the middle of a run's messages and adds
// one for a run that does not exist: Check reports both.
func TestCheckFindsBrokenItems(t *testing.T) {
	db, err := Open(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := agent.NewState("run-1", "goal", []agent.Message{{Role: agent.RoleUser, Content: "a"}, {Role: agent.RoleAssistant, Content: "b"}}, time.Now())
	err = db.Update(t.Context(), func(tx bot.Tx) error {
		return tx.PutRun(&bot.RunRecord{ID: "run-1", Thread: bot.ThreadRef{Platform: "web", Channel: "c", Thread: "1"}, State: st})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Check(t.Context()); err != nil {
		t.Fatalf("Check of a sound database: %v", err)
	}
	for _, sql := range []string{
		"DELETE FROM run_items WHERE run_id = 'run-1' AND kind = 'm' AND idx = 1",
		"INSERT INTO run_items (run_id, kind, idx, data) VALUES ('run-9', 'c', 0, '{}')",
	} {
		if _, err := db.pool.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	err = db.Check(t.Context())
	if err == nil || !strings.Contains(err.Error(), "sequence is broken") || !strings.Contains(err.Error(), "name no run run-9") {
		t.Errorf("Check = %v, want the broken sequence and the orphan item", err)
	}
}
