package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

type claimStep struct {
	name string
	id   string
	at   time.Duration // since t0
	ttl  time.Duration
	want bool
}

func claimAll(t *testing.T, s bot.Store, steps []claimStep) {
	t.Helper()
	for _, st := range steps {
		got, err := s.ClaimEvent(t.Context(), st.id, at(st.at), st.ttl)
		if err != nil {
			t.Fatalf("%s: claim %s: %v", st.name, st.id, err)
		}
		if got != st.want {
			t.Errorf("%s: claim %s at t0+%s = %v, want %v", st.name, st.id, st.at, got, st.want)
		}
	}
}

// testDedupe plays one delivery and its retries against the clock. A claim is live while
// now is before its expiry.
func testDedupe(t *testing.T, su *suite) {
	s := su.open(t)
	claimAll(t, s, []claimStep{
		{"first delivery", "Ev1", 0, time.Minute, true},
		{"retry", "Ev1", 0, time.Minute, false},
		{"later retry", "Ev1", 30 * time.Second, time.Minute, false},
		{"another event", "Ev2", 30 * time.Second, time.Minute, true},
		{"last moment", "Ev1", time.Minute - time.Nanosecond, time.Minute, false},
		{"at expiry", "Ev1", time.Minute, time.Minute, true},
		{"retry of the new claim", "Ev1", 90 * time.Second, time.Minute, false},
		{"other event still live", "Ev2", 89 * time.Second, time.Minute, false},
		{"other event expired", "Ev2", 90 * time.Second, time.Minute, true},
	})
}

// testDedupeInTx checks that a claim made inside a transaction is kept only if the
// transaction commits, and that it is the same claim the Store's own ClaimEvent sees.
func testDedupeInTx(t *testing.T, su *suite) {
	s := su.open(t)
	ctx := t.Context()
	errAbort := errors.New("the work failed")
	claimTx := func(id string, fail error) (bool, error) {
		var first bool
		err := s.Update(ctx, func(tx bot.Tx) error {
			var err error
			if first, err = tx.ClaimEvent(id, t0, time.Minute); err != nil {
				return err
			}
			return fail
		})
		return first, err
	}
	if first, err := claimTx("Ev1", errAbort); !errors.Is(err, errAbort) || !first {
		t.Fatalf("claim in a failing transaction = %v, %v; want true and the transaction's error", first, err)
	}
	if first, err := claimTx("Ev1", nil); err != nil || !first {
		t.Fatalf("claim after the rollback = %v, %v; want the first claim (the failed one left nothing)", first, err)
	}
	if first, err := claimTx("Ev1", nil); err != nil || first {
		t.Errorf("second claim in a transaction = %v, %v; want a duplicate", first, err)
	}
	claimAll(t, s, []claimStep{{"store claim after a transaction claim", "Ev1", 0, time.Minute, false}})
	claimAll(t, s, []claimStep{{"store claim first", "Ev2", 0, time.Minute, true}})
	if first, err := claimTx("Ev2", nil); err != nil || first {
		t.Errorf("transaction claim after a store claim = %v, %v; want a duplicate", first, err)
	}
	if first, err := claimTx("", nil); err == nil || first {
		t.Errorf("claim of an empty id = %v, %v; want an error", first, err)
	}
	err := s.View(ctx, func(tx bot.Tx) error {
		_, err := tx.ClaimEvent("Ev3", t0, time.Minute)
		return err
	})
	if err == nil {
		t.Error("a claim inside View succeeded; want an error")
	}
}

func testDedupeReopen(t *testing.T, su *suite) {
	if su.reopen == nil {
		t.Skip("the backend cannot be reopened")
	}
	s := su.open(t)
	claimAll(t, s, []claimStep{{"first delivery", "Ev1", 0, time.Hour, true}})
	s = su.reopen(t, s)
	claimAll(t, s, []claimStep{
		{"retry after restart", "Ev1", time.Minute, time.Hour, false},
		{"after expiry", "Ev1", time.Hour, time.Hour, true},
	})
}

// testDurable checks that a committed transaction, and only it, is there after a restart.
func testDurable(t *testing.T, su *suite) {
	if su.reopen == nil {
		t.Skip("the backend cannot be reopened")
	}
	s := su.open(t)
	want := fullRun("run-1")
	update(t, s, func(tx bot.Tx) error {
		return errors.Join(tx.PutRun(want), tx.AppendAudit(bot.AuditEntry{At: t0, Action: "approve", RunID: "run-1"}))
	})
	_ = s.Update(t.Context(), func(tx bot.Tx) error {
		if err := tx.PutRun(newRun("run-2", threadA, agent.StatusQueued, t0)); err != nil {
			return err
		}
		return errors.New("rolled back")
	})
	s = su.reopen(t, s)
	view(t, s, func(tx bot.Tx) error {
		got, err := tx.Run("run-1")
		if err != nil {
			t.Fatalf("run after reopen: %v", err)
		}
		equal(t, "run after reopen", got, want)
		runs, err := tx.Runs(bot.RunFilter{})
		if err != nil {
			return err
		}
		equal(t, "runs after reopen", ids(runs), []string{"run-1"})
		audit, err := tx.Audit("run-1")
		if err != nil {
			return err
		}
		equal(t, "audit entries after reopen", len(audit), 1)
		return nil
	})
	// A run put after the restart still lists after the older ones.
	update(t, s, func(tx bot.Tx) error { return tx.PutRun(newRun("run-0", threadA, agent.StatusQueued, t0)) })
	view(t, s, func(tx bot.Tx) error {
		runs, err := tx.Runs(bot.RunFilter{})
		if err != nil {
			return err
		}
		equal(t, "runs after a put after reopen", ids(runs), []string{"run-1", "run-0"})
		return nil
	})
}

// testPurge checks that purge deletes expired claims only, counts them, and follows a claim
// renewed after expiry to its new expiry.
func testPurge(t *testing.T, su *suite) {
	s := su.open(t)
	claimAll(t, s, []claimStep{
		{"a", "Ev-a", 0, time.Minute, true},
		{"b", "Ev-b", 0, 5 * time.Minute, true},
		{"c", "Ev-c", 0, 10 * time.Minute, true},
		{"r", "Ev-r", 0, time.Minute, true},
		// Ev-r expired and is claimed again until t0+11m; its first expiry must not purge it.
		{"r again", "Ev-r", time.Minute, 10 * time.Minute, true},
	})
	purges := []struct {
		at   time.Duration
		want int
	}{
		{0, 0},
		{59 * time.Second, 0},
		{2 * time.Minute, 1}, // Ev-a
		{2 * time.Minute, 0},
		{5 * time.Minute, 1}, // Ev-b, at its expiry
	}
	for _, p := range purges {
		n, err := s.PurgeEvents(t.Context(), at(p.at))
		if err != nil {
			t.Fatalf("purge at t0+%s: %v", p.at, err)
		}
		if n != p.want {
			t.Errorf("purge at t0+%s removed %d claims, want %d", p.at, n, p.want)
		}
	}
	claimAll(t, s, []claimStep{
		{"purged a is new again", "Ev-a", 6 * time.Minute, time.Hour, true},
		{"c is still live", "Ev-c", 6 * time.Minute, time.Minute, false},
		{"r is still live", "Ev-r", 6 * time.Minute, time.Minute, false},
	})
	n, err := s.PurgeEvents(t.Context(), at(11*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 { // Ev-c and Ev-r
		t.Errorf("purge at t0+11m removed %d claims, want 2", n)
	}
	claimAll(t, s, []claimStep{{"a is still live", "Ev-a", 11 * time.Minute, time.Hour, false}})
}
