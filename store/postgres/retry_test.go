package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// raise makes the transaction's next statement fail with the SQLSTATE code, as PostgreSQL
// itself would on a conflict.
func raise(t *tx, code string) error {
	_, err := t.exec("DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '" + code + "'; END $$")
	return err
}

func TestRetry(t *testing.T) {
	tests := []struct {
		name     string
		code     string
		failures int // attempts that fail before one succeeds
		swallow  bool
		want     int // attempts made
		wantErr  string
	}{
		{"serialization failure", "40001", 1, false, 2, ""},
		{"deadlock", "40P01", 2, false, 3, ""},
		{"unique violation", "23505", 1, false, 2, ""},
		{"conflict the function swallowed", "40001", 1, true, 2, ""},
		{"division by zero is not retried", "22012", 1, false, 1, "22012"},
		{"bounded", "40001", 100, false, 4, "40001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(t.Context(), pgtest.URL(t), WithMaxAttempts(4))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			attempts := 0
			err = db.do(t.Context(), true, func(tx *tx) error {
				attempts++
				if attempts <= tt.failures {
					if err := raise(tx, tt.code); err != nil && !tt.swallow {
						return err
					}
				}
				return nil
			})
			if attempts != tt.want {
				t.Errorf("ran %d times, want %d", attempts, tt.want)
			}
			if tt.wantErr == "" && err != nil {
				t.Errorf("got %v, want success", err)
			}
			var pgErr *pgconn.PgError
			if tt.wantErr != "" && (!errors.As(err, &pgErr) || pgErr.Code != tt.wantErr) {
				t.Errorf("got %v, want SQLSTATE %s", err, tt.wantErr)
			}
		})
	}
}

// TestRetryHonoursContext cancels the context while the function keeps losing: Update
// stops instead of running out its attempts.
func TestRetryHonoursContext(t *testing.T) {
	db, err := Open(t.Context(), pgtest.URL(t), WithMaxAttempts(1000))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(t.Context())
	attempts := 0
	err = db.do(ctx, true, func(tx *tx) error {
		attempts++
		if attempts == 3 {
			cancel()
		}
		return raise(tx, "40001")
	})
	if !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "40001") {
		t.Errorf("got %v, want the cancellation", err)
	}
	if attempts != 3 {
		t.Errorf("ran %d times after the cancel at the third, want 3", attempts)
	}
}

// TestRealDeadlockRetried makes two transactions lock two approvals in opposite orders,
// each waiting on its first attempt until the other holds its first lock: PostgreSQL
// finds the deadlock and aborts one (40P01), which runs again and succeeds, so both
// decisions land.
func TestRealDeadlockRetried(t *testing.T) {
	db, err := Open(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	err = db.Update(t.Context(), func(tx bot.Tx) error {
		return errors.Join(
			tx.PutApproval(&bot.Approval{ID: "ap-a", RunID: "run-1", Risk: agent.RiskDangerous, Status: bot.ApprovalPending, CreatedAt: t0}),
			tx.PutApproval(&bot.Approval{ID: "ap-b", RunID: "run-1", Risk: agent.RiskDangerous, Status: bot.ApprovalPending, CreatedAt: t0}))
	})
	if err != nil {
		t.Fatal(err)
	}
	var firstLocks sync.WaitGroup
	firstLocks.Add(2)
	var attempts [2]atomic.Int32
	decide := func(i int, first, second string) error {
		return db.Update(t.Context(), func(tx bot.Tx) error {
			a, err := tx.Approval(first)
			if err != nil {
				return err
			}
			if attempts[i].Add(1) == 1 {
				firstLocks.Done()
				firstLocks.Wait()
			}
			b, err := tx.Approval(second)
			if err != nil {
				return err
			}
			a.Reason += fmt.Sprintf("[%d]", i)
			b.Reason += fmt.Sprintf("[%d]", i)
			return errors.Join(tx.PutApproval(a), tx.PutApproval(b))
		})
	}
	errs := make(chan error, 2)
	go func() { errs <- decide(0, "ap-a", "ap-b") }()
	go func() { errs <- decide(1, "ap-b", "ap-a") }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("a decision failed: %v", err)
		}
	}
	if n := attempts[0].Load() + attempts[1].Load(); n < 3 {
		t.Errorf("%d attempts in all, want a deadlock's retry (at least 3)", n)
	}
	err = db.View(t.Context(), func(tx bot.Tx) error {
		for _, id := range []string{"ap-a", "ap-b"} {
			a, err := tx.Approval(id)
			if err != nil {
				return err
			}
			if len(a.Reason) != 6 {
				t.Errorf("approval %s holds %q, want both transactions' marks", id, a.Reason)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
