package agent

import (
	"context"
	"fmt"
)

// A step ends with a checkpoint, and the loop's next act outside the process is the next
// step's model call. That call changes nothing anyone sees: if the checkpoint is refused, or
// the process dies before it is written, the run goes on from the checkpoint before it and
// asks the model again. So with Hooks.SaveAhead the loop does not wait for that checkpoint:
// it writes it from a snapshot of the state in another goroutine, and asks the model for the
// next step meanwhile. With many runs at once, the writes of the store's one writer then
// overlap the model's latency instead of adding to it.
//
// The save is awaited (settle) before anything that depends on it: before the model's reply
// is used, before any tool runs, before the next save (so saves are written in the order they
// were taken), and before Run returns. A refused save stops the run there with ErrCheckpoint,
// as a refused save always does, and the reply that came meanwhile is dropped.

// saveAhead is save for the checkpoint that ends a step.
func (r *runner) saveAhead(ctx context.Context) error {
	if !r.h.SaveAhead || r.h.Checkpoint == nil || r.share != nil {
		// An executor's saves are its plan's, made under the plan's lock (executor.go).
		return r.save(ctx)
	}
	if err := r.settle(); err != nil {
		return err
	}
	r.account()
	snap := r.st.Snapshot()
	done := make(chan error, 1)
	// The save is the run's state at a step boundary, which must be written whole whatever
	// happens to the run next: a cancel or a shutdown meanwhile is the loop's to handle, at
	// its next check, after this save.
	wctx := context.WithoutCancel(ctx)
	go func() { done <- r.h.Checkpoint(wctx, snap) }()
	r.pending = done
	return nil
}

// settle waits for the save being written ahead, if any, and returns its error as save
// would have.
func (r *runner) settle() error {
	if r.pending == nil {
		return nil
	}
	err := <-r.pending
	r.pending = nil
	if err != nil {
		return fmt.Errorf("run %s: %w: %w", r.st.RunID, ErrCheckpoint, err)
	}
	return nil
}
