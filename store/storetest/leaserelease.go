package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// testUpdateFencedRelease: a run's last write releases its lease in its own transaction
// (bot.LeaseReleaser) when its function succeeds, and only then; a superseded lease runs
// nothing and releases nothing.
func testUpdateFencedRelease(t *testing.T, su *suite) {
	s := su.open(t)
	l := leaser(t, s)
	r, ok := s.(bot.LeaseReleaser)
	if !ok {
		t.Skipf("%T does not implement bot.LeaseReleaser", s)
	}
	putRuns(t, s, [2]string{"run-1", string(agent.StatusRunning)})
	held := claim(t, l, "replica-1", 1, 0, 30*time.Second)
	equal(t, "claim", leaseIDs(held), []string{"run-1@1"})
	finish := func(lease bot.Lease, fail error) (ran bool, err error) {
		err = r.UpdateFencedRelease(t.Context(), lease, func(tx bot.Tx) error {
			ran = true
			rec, err := tx.Run("run-1")
			if err != nil {
				return err
			}
			if fail != nil {
				return fail
			}
			rec.State.Status = agent.StatusCompleted
			return tx.PutRun(rec)
		})
		return ran, err
	}
	refused := errors.New("refused")
	if _, err := finish(held[0], refused); !errors.Is(err, refused) {
		t.Fatalf("a last write whose function fails: %v, want its error", err)
	}
	if got, err := l.Lease(t.Context(), "run-1"); err != nil || got != held[0] {
		t.Fatalf("lease after a failed last write %+v, %v; want it held as claimed", got, err)
	}
	if _, err := finish(held[0], nil); err != nil {
		t.Fatalf("last write: %v", err)
	}
	got, err := l.Lease(t.Context(), "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Owner != "" || got.Epoch != 1 || got.Live(at(time.Second)) {
		t.Errorf("lease after the last write %+v, want released at epoch 1", got)
	}
	view(t, s, func(tx bot.Tx) error {
		rec, err := tx.Run("run-1")
		if err == nil && rec.Status != agent.StatusCompleted {
			t.Errorf("run %s after the last write, want completed", rec.Status)
		}
		return err
	})
	if ran, err := finish(held[0], nil); !errors.Is(err, bot.ErrFenced) || ran {
		t.Errorf("a last write under the released lease: ran %t, %v; want ErrFenced and nothing run", ran, err)
	}
}
