package bot_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestLeadRunsOnOneReplica: two replicas run the same role's work through Lead; only the
// first runs it, until it is cut off past its leadership: then its work is stopped and the
// other's starts.
func TestLeadRunsOnOneReplica(t *testing.T) {
	bubble(t, func(t *testing.T) {
		db := openStore(t)
		clk := &clock{}
		m := newModel(t)
		a := newReplica(t, "a", db, clk, m)
		b := newReplica(t, "b", db, clk, m)
		type work struct{ started, ended chan struct{} }
		lead := func(r *replica) (work, func()) {
			w := work{started: make(chan struct{}, 4), ended: make(chan struct{}, 4)}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- r.bot.Lead(ctx, "gateway", func(ctx context.Context) error {
					w.started <- struct{}{}
					<-ctx.Done()
					w.ended <- struct{}{}
					return nil
				})
			}()
			return w, func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Lead of %s: %v", r.id, err)
				}
			}
		}
		wa, stopA := lead(a)
		defer stopA()
		synctest.Wait()
		wb, stopB := lead(b)
		defer stopB()
		synctest.Wait()
		if len(wa.started) != 1 || len(wb.started) != 0 {
			t.Fatalf("a started %d times and b %d, want a once (it leads)", len(wa.started), len(wb.started))
		}
		a.store.Set(true)
		clk.Advance(31 * time.Second)
		time.Sleep(10 * time.Second) // both replicas' elections come round
		synctest.Wait()
		if len(wa.ended) != 1 || len(wb.started) != 1 {
			t.Errorf("a's work ended %d times and b's started %d, want each once after a lost the role", len(wa.ended), len(wb.started))
		}
	})
}
