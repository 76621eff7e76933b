package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// TestViewWhoseConnectionEndsAtItsCommitRunsAgain ends a View's session (as a server restart
// does) after its reads and before its COMMIT: a read-only transaction commits nothing, so
// it runs again on a new connection instead of failing its caller, however far its COMMIT
// got.
func TestViewWhoseConnectionEndsAtItsCommitRunsAgain(t *testing.T) {
	url := pgtest.URL(t)
	db, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	admin, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(t.Context())
	attempts := 0
	err = db.View(t.Context(), func(tx bot.Tx) error {
		attempts++
		if _, err := tx.RunIDs(bot.RunFilter{}); err != nil {
			return err
		}
		if attempts == 1 {
			var pid int
			if err := admin.QueryRow(t.Context(), `SELECT pid FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle in transaction'`).Scan(&pid); err != nil {
				t.Fatalf("the View's session: %v", err)
			}
			var ended bool
			if err := admin.QueryRow(t.Context(), "SELECT pg_terminate_backend($1, 5000)", pid).Scan(&ended); err != nil || !ended {
				t.Fatalf("terminating the View's session = %v, %v", ended, err)
			}
		}
		return nil
	})
	if err != nil || attempts != 2 {
		t.Errorf("View = %v after %d attempts, want nil after 2", err, attempts)
	}
}
