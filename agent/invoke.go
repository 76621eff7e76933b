package agent

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// invoke runs one call under its timeout. Control tools act on the state directly: those that
// change it are never read-only, so they run on the loop's goroutine only; read_output is
// read-only and only reads the state, which nothing changes while a step's calls run.
//
// A tool is expected to return soon after its context ends. One that does not (a read blocked
// on a FIFO, a library that ignores ctx) would hold the run, its worker slot and shutdown
// forever, so the call is abandoned once Config.AbandonAfter has passed since its context
// ended: the loop goes on as if the call failed, and the goroutine is left to finish on its
// own, counted by Agent.Abandoned until it does.
func (r *runner) invoke(ctx context.Context, c CallRecord) callResult {
	reg := r.a.tools[c.Name]
	switch c.Name {
	case updatePlanName:
		return r.updatePlan(c.Arguments)
	case readOutputName:
		return r.readOutput(c.Arguments)
	}
	timeout := reg.info.Timeout
	if timeout <= 0 {
		timeout = time.Duration(r.a.cfg.ToolTimeout)
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sink := &usageSink{}
	tctx = context.WithValue(tctx, usageKey{}, sink)
	if r.h.Ask != nil {
		tctx = WithAsk(tctx, r.st.RunID, c.ID, r.h.Ask)
	}

	w := &watch{done: make(chan callResult, 1)}
	go func() {
		res := callResult{}
		defer func() {
			if p := recover(); p != nil {
				r.a.log.Error("tool panicked", "tool", c.Name, "panic", p)
				res = callResult{err: fmt.Errorf("%s crashed", c.Name)}
			}
			w.returned(res, r.a.abandoned)
		}()
		res.out, res.err = reg.tool.Call(tctx, Invocation{RunID: r.st.RunID, CallID: c.ID, Args: rawArgs(c.Arguments)})
	}()

	var res callResult
	select {
	case res = <-w.done:
	case <-tctx.Done():
		grace := time.NewTimer(time.Duration(r.a.cfg.AbandonAfter))
		defer grace.Stop()
		select {
		case res = <-w.done:
		case <-grace.C:
			if !w.abandon(r.a.abandoned) {
				res = <-w.done // it returned just now
				break
			}
			r.a.log.Error("tool call abandoned: it did not return after its context ended",
				"tool", c.Name, "run", r.st.RunID, "call", c.ID, "grace", time.Duration(r.a.cfg.AbandonAfter))
			if r.a.abandoned.hook != nil {
				r.a.abandoned.hook(c.Name)
			}
			return callResult{err: fmt.Errorf("%s did not stop within %s of being cancelled and was abandoned; its effects are unknown",
				c.Name, time.Duration(r.a.cfg.AbandonAfter))}
		}
	}
	if res.err != nil && tctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		res.err = fmt.Errorf("%s timed out after %s", c.Name, timeout)
	}
	res.usage = sink.total()
	return res
}

// watch is what the loop and a tool call's goroutine share: the result, and whether the loop
// gave up on it before it came.
type watch struct {
	done chan callResult // buffered, so that an abandoned goroutine never blocks on it

	mu        sync.Mutex
	back      bool // the tool returned
	abandoned bool // the loop stopped waiting first
}

// returned hands over the tool's result; for an abandoned call it only settles the count.
func (w *watch) returned(res callResult, a *abandoned) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.back = true
	w.done <- res
	if w.abandoned {
		a.running.Add(-1)
	}
}

// abandon gives up on the call unless it has returned, and reports whether it did.
func (w *watch) abandon(a *abandoned) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.back {
		return false
	}
	w.abandoned = true
	a.running.Add(1)
	a.total.Add(1)
	return true
}

// abandoned counts the tool calls the loop stopped waiting for.
type abandoned struct {
	running atomic.Int64 // abandoned and not returned yet
	total   atomic.Int64
	hook    func(tool string)
}

// Abandoned reports how many tool calls the loop has abandoned since it started, and how many
// of them have still not returned.
func (a *Agent) Abandoned() (total, running int64) {
	return a.abandoned.total.Load(), a.abandoned.running.Load()
}

// WithAbandonHook sets a function told the tool's name each time a call is abandoned, for
// metrics and alerts.
func WithAbandonHook(fn func(tool string)) Option { return func(a *Agent) { a.abandoned.hook = fn } }
