package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

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
