package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// testRunLease reads a run's lease inside transactions, as a replica answering a question
// another replica's call asked does: the lease as claimed, taken over and released, in a
// View and in an Update, and ErrNotFound for a run never claimed.
func testRunLease(t *testing.T, su *suite) {
	s := su.open(t)
	l := leaser(t, s)
	putRuns(t, s, [2]string{"run-1", string(agent.StatusRunning)}, [2]string{"run-2", string(agent.StatusAwaitingInput)})
	read := func(what, id string, want bot.Lease) {
		t.Helper()
		for _, write := range []bool{false, true} {
			fn := func(tx bot.Tx) error {
				got, err := tx.RunLease(id)
				if err != nil {
					return err
				}
				equal(t, what, got, want)
				return nil
			}
			if write {
				update(t, s, fn)
			} else {
				view(t, s, fn)
			}
		}
	}
	held := claim(t, l, "replica-1", 2, 0, 30*time.Second)
	equal(t, "claim", leaseIDs(held), []string{"run-1@1"})
	read("claimed lease", "run-1", bot.Lease{RunID: "run-1", Owner: "replica-1", Epoch: 1, Expires: at(30 * time.Second)})
	taken := claim(t, l, "replica-2", 1, 30*time.Second, 30*time.Second)
	equal(t, "takeover", leaseIDs(taken), []string{"run-1@2"})
	read("lease taken over", "run-1", bot.Lease{RunID: "run-1", Owner: "replica-2", Epoch: 2, Expires: at(time.Minute)})
	if err := l.ReleaseLease(t.Context(), taken[0]); err != nil {
		t.Fatal(err)
	}
	got := func() bot.Lease {
		var got bot.Lease
		view(t, s, func(tx bot.Tx) error {
			var err error
			got, err = tx.RunLease("run-1")
			return err
		})
		return got
	}()
	if got.Owner != "" || got.Epoch != 2 || got.Live(at(31*time.Second)) {
		t.Errorf("released lease read as %+v, want no owner at epoch 2", got)
	}
	view(t, s, func(tx bot.Tx) error {
		if _, err := tx.RunLease("run-2"); !errors.Is(err, bot.ErrNotFound) {
			t.Errorf("lease of a run never claimed: got %v, want ErrNotFound", err)
		}
		if _, err := tx.RunLease("run-none"); !errors.Is(err, bot.ErrNotFound) {
			t.Errorf("lease of no run: got %v, want ErrNotFound", err)
		}
		return nil
	})
}
