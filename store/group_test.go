package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/loopbot/loopbot/bot"
)

// TestGroupCommit holds one write inside its transaction while five more queue behind it,
// then lets it commit: the five go in one transaction, and one of them misbehaves in the
// way each case names. The bubble tells when every writer is waiting, so the group is
// formed by construction, not by timing.
func TestGroupCommit(t *testing.T) {
	errWork := errors.New("the work failed")
	const writers, odd = 5, 2
	tests := []struct {
		name string
		// fn is the odd writer's function; nil writes like the others.
		fn func(ctx context.Context, tx bot.Tx) error
		// cancel cancels the odd writer's context while it waits.
		cancel bool
		// readOnly makes every writer only read.
		readOnly bool

		wantErr   error
		wantPanic any
		oddWrote  bool // the odd writer's action is stored
		oddRuns   int32
		// How often the function of each writer queued before the odd one ran, and of each
		// one after it: the group runs in the order the writers queued.
		beforeRuns, afterRuns int32
		commits               uint64
	}{
		{name: "all succeed", oddWrote: true, oddRuns: 1, beforeRuns: 1, afterRuns: 1, commits: 2},
		{
			name: "one fails after writing",
			fn: func(_ context.Context, tx bot.Tx) error {
				return errors.Join(tx.PutAction(&bot.Action{ID: "act-2", Kind: bot.ActionCancel, RunID: "r"}), errWork)
			},
			// The group is rolled back and runs again without it; it runs again alone.
			wantErr: errWork, oddRuns: 2, beforeRuns: 2, afterRuns: 1, commits: 2,
		},
		{
			name:    "one fails before writing",
			fn:      func(context.Context, bot.Tx) error { return errWork },
			wantErr: errWork, oddRuns: 1, beforeRuns: 1, afterRuns: 1, commits: 2,
		},
		{
			name: "one panics",
			fn: func(_ context.Context, tx bot.Tx) error {
				if err := tx.PutAction(&bot.Action{ID: "act-2", Kind: bot.ActionCancel, RunID: "r"}); err != nil {
					return err
				}
				panic("bug in a transaction")
			},
			wantPanic: "bug in a transaction", oddRuns: 2, beforeRuns: 2, afterRuns: 1, commits: 2,
		},
		{name: "one gives up while it waits", cancel: true, wantErr: context.Canceled, oddRuns: 0, beforeRuns: 1, afterRuns: 1, commits: 2},
		{name: "nothing written", readOnly: true, oddRuns: 1, beforeRuns: 1, afterRuns: 1, commits: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db, err := Open(filepath.Join(t.TempDir(), "loopbot.db"))
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				before := lastTxID(t, db)

				entered, release := make(chan struct{}), make(chan struct{})
				leaderDone := make(chan error)
				go func() {
					leaderDone <- db.Update(t.Context(), func(tx bot.Tx) error {
						close(entered)
						<-release
						return tx.PutAction(&bot.Action{ID: "leader", Kind: bot.ActionCancel, RunID: "r"})
					})
				}()
				<-entered

				var runs [writers]atomic.Int32
				errs := make([]error, writers)
				panics := make([]any, writers)
				done := make(chan struct{})
				oddCtx, cancelOdd := context.WithCancel(t.Context())
				defer cancelOdd()
				for i := range writers {
					ctx := t.Context()
					if i == odd {
						ctx = oddCtx
					}
					fn := func(ctx context.Context, tx bot.Tx) error {
						if tt.readOnly {
							_, err := tx.Action("leader")
							if errors.Is(err, bot.ErrNotFound) {
								err = nil
							}
							return err
						}
						return tx.PutAction(&bot.Action{ID: fmt.Sprintf("act-%d", i), Kind: bot.ActionCancel, RunID: "r"})
					}
					if i == odd && tt.fn != nil {
						fn = tt.fn
					}
					go func() {
						defer func() {
							panics[i] = recover()
							done <- struct{}{}
						}()
						errs[i] = db.Update(ctx, func(tx bot.Tx) error {
							runs[i].Add(1)
							return fn(ctx, tx)
						})
					}()
					// Queued before the next one starts.
					synctest.Wait()
				}
				if got := queued(db); got != writers {
					t.Fatalf("%d writers queued, want %d", got, writers)
				}
				if tt.cancel {
					cancelOdd()
				}
				close(release)
				if err := <-leaderDone; err != nil {
					t.Fatalf("leader: %v", err)
				}
				for range writers {
					<-done
				}

				for i := range writers {
					wantErr, wantRuns := error(nil), tt.beforeRuns
					if i > odd {
						wantRuns = tt.afterRuns
					}
					var wantPanic any
					if i == odd {
						wantErr, wantRuns, wantPanic = tt.wantErr, tt.oddRuns, tt.wantPanic
					}
					if !errors.Is(errs[i], wantErr) || (wantErr == nil && errs[i] != nil) {
						t.Errorf("writer %d: err %v, want %v", i, errs[i], wantErr)
					}
					if panics[i] != wantPanic {
						t.Errorf("writer %d: panic %v, want %v", i, panics[i], wantPanic)
					}
					if got := runs[i].Load(); got != wantRuns {
						t.Errorf("writer %d: function ran %d times, want %d", i, got, wantRuns)
					}
					wantStored := !tt.readOnly && (i != odd || tt.oddWrote)
					if got := stored(t, db, fmt.Sprintf("act-%d", i)); got != wantStored {
						t.Errorf("writer %d: action stored = %t, want %t", i, got, wantStored)
					}
				}
				if got := lastTxID(t, db) - before; got != tt.commits {
					t.Errorf("%d commits, want %d (the leader's and one for the group)", got, tt.commits)
				}
				if err := db.Check(context.Background()); err != nil {
					t.Error(err)
				}
			})
		})
	}
}

// TestGroupCommitSurvivesGoexit has the function of a leading writer end its goroutine, as
// t.FailNow does: the store releases bbolt's write lock, the other writer of the group
// commits alone, and later writes go through.
func TestGroupCommitSurvivesGoexit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, err := Open(filepath.Join(t.TempDir(), "loopbot.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		entered, release := make(chan struct{}), make(chan struct{})
		go db.Update(t.Context(), func(tx bot.Tx) error {
			close(entered)
			<-release
			return nil
		})
		<-entered
		exited := make(chan struct{})
		go func() {
			defer close(exited)
			db.Update(t.Context(), func(tx bot.Tx) error {
				if err := tx.PutAction(&bot.Action{ID: "gone", Kind: bot.ActionCancel, RunID: "r"}); err != nil {
					return err
				}
				runtime.Goexit()
				return nil
			})
			t.Error("Update returned after its function ended the goroutine")
		}()
		synctest.Wait() // queued first, so it leads the next group
		other := make(chan error)
		go func() {
			other <- db.Update(t.Context(), func(tx bot.Tx) error {
				return tx.PutAction(&bot.Action{ID: "kept", Kind: bot.ActionCancel, RunID: "r"})
			})
		}()
		synctest.Wait()
		close(release)
		<-exited
		if err := <-other; err != nil {
			t.Fatalf("the other writer of the group: %v", err)
		}
		if err := db.Update(t.Context(), func(tx bot.Tx) error {
			return tx.PutAction(&bot.Action{ID: "later", Kind: bot.ActionCancel, RunID: "r"})
		}); err != nil {
			t.Fatalf("a later write: %v", err)
		}
		for id, want := range map[string]bool{"gone": false, "kept": true, "later": true} {
			if got := stored(t, db, id); got != want {
				t.Errorf("action %s stored = %t, want %t", id, got, want)
			}
		}
	})
}

// TestWriteFailureIsTheStores gives a write a database bbolt cannot begin a transaction on:
// the writer gets bbolt's error wrapped as the store's own, and WriteError reports it.
func TestWriteFailureIsTheStores(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "loopbot.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.bolt.Close(); err != nil {
		t.Fatal(err)
	}
	ran := false
	err = db.Update(t.Context(), func(tx bot.Tx) error { ran = true; return nil })
	if !errors.Is(err, berrors.ErrDatabaseNotOpen) || !strings.HasPrefix(err.Error(), "store update: ") {
		t.Errorf("Update on a closed database = %v, want the store's error wrapping bbolt's", err)
	}
	if ran {
		t.Error("the function ran without a transaction")
	}
	if werr := db.WriteError(); werr == nil || werr.Error() != err.Error() {
		t.Errorf("WriteError() = %v, want %v", werr, err)
	}
}

func queued(db *DB) int {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	return len(db.queue)
}

// lastTxID is the ID of the last committed write transaction: it grows by one a commit.
func lastTxID(t *testing.T, db *DB) uint64 {
	t.Helper()
	var id int
	if err := db.bolt.View(func(btx *bolt.Tx) error { id = btx.ID(); return nil }); err != nil {
		t.Fatal(err)
	}
	return uint64(id)
}

func stored(t *testing.T, db *DB, actionID string) bool {
	t.Helper()
	err := db.View(t.Context(), func(tx bot.Tx) error {
		_, err := tx.Action(actionID)
		return err
	})
	if errors.Is(err, bot.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}
