package agent

import "testing"

// TestWatch checks the hand-over between the loop and a tool call's goroutine in both orders.
func TestWatch(t *testing.T) {
	t.Run("abandoned, then returns", func(t *testing.T) {
		var a abandoned
		w := &watch{done: make(chan callResult, 1)}
		if !w.abandon(&a) {
			t.Fatal("abandon of a call that has not returned refused")
		}
		if a.total.Load() != 1 || a.running.Load() != 1 {
			t.Fatalf("after abandon: total %d running %d", a.total.Load(), a.running.Load())
		}
		w.returned(callResult{out: "late"}, &a) // must not block, and settles the count
		if a.total.Load() != 1 || a.running.Load() != 0 {
			t.Fatalf("after return: total %d running %d", a.total.Load(), a.running.Load())
		}
	})
	t.Run("returns just before the grace ends", func(t *testing.T) {
		var a abandoned
		w := &watch{done: make(chan callResult, 1)}
		w.returned(callResult{out: "in time"}, &a)
		if w.abandon(&a) {
			t.Fatal("a call that returned was abandoned")
		}
		if res := <-w.done; res.out != "in time" || a.total.Load() != 0 || a.running.Load() != 0 {
			t.Fatalf("result %q, total %d running %d", res.out, a.total.Load(), a.running.Load())
		}
	})
}
