package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// replies is a model in the process, for synctest bubbles: it answers the nth request with
// the nth reply, and the last reply after that.
type replies struct {
	mu    sync.Mutex
	asked int
	msgs  []agent.Message
}

func (m *replies) Complete(ctx context.Context, req agent.Request) (agent.Reply, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	msg := m.msgs[min(m.asked, len(m.msgs)-1)]
	m.asked++
	return agent.Reply{Message: msg}, nil
}

func (m *replies) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.asked
}

func toolCall(id, name string) agent.Message {
	return agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: id, Name: name, Arguments: `{}`}}}
}

// gatedSaves is a Checkpoint hook that keeps every save, holds the one of a step's end
// (running, with every call reported) until gate is closed, and counts saves written at
// once.
type gatedSaves struct {
	gate     chan struct{}
	fail     error // what the held save returns
	mu       sync.Mutex
	saved    []*agent.State
	inFlight int
	overlap  bool
}

func (g *gatedSaves) checkpoint(ctx context.Context, st *agent.State) error {
	g.mu.Lock()
	g.inFlight++
	g.overlap = g.overlap || g.inFlight > 1
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	// Encoded and decoded, as a store keeps it: what was saved cannot change afterwards.
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	kept, err := agent.UnmarshalState(data)
	if err != nil {
		return err
	}
	held := st.Status == agent.StatusRunning && len(st.Calls) > 0 && !st.AnyCall(func(c *agent.CallRecord) bool { return !c.Reported })
	if held {
		// A save honours its context, as a store's does.
		select {
		case <-g.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	g.mu.Lock()
	g.saved = append(g.saved, kept)
	g.mu.Unlock()
	if held {
		return g.fail
	}
	return nil
}

// releaseHeld checks that the run whose result done will carry has not returned while g
// holds a save, then lets the save through and waits for the run, which must succeed.
func releaseHeld(t *testing.T, g *gatedSaves, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("the run returned (%v) while its step's save was held", err)
	default:
	}
	close(g.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// runAhead starts a run of model m and tools with saves g ahead, and returns its result.
func runAhead(t *testing.T, m agent.Model, g *gatedSaves, tools ...agent.Tool) <-chan error {
	t.Helper()
	ag := newAgent(t, m, agent.Config{NoProgressSteps: -1}, tools)
	st := agent.NewState("run-ahead", "look", nil, time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
	done := make(chan error, 1)
	go func() {
		done <- ag.Run(context.Background(), st, agent.Hooks{Checkpoint: g.checkpoint, SaveAhead: true})
	}()
	return done
}

// TestSaveAheadOverlapsTheNextModelCall holds the save of a step's end: the loop asks the
// model for the next step meanwhile, and waits for the save before it uses the reply. The
// save holds the state as the step ended, although the loop has gone on.
func TestSaveAheadOverlapsTheNextModelCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &replies{msgs: []agent.Message{toolCall("c1", "look"), {Role: agent.RoleAssistant, Content: "Done."}}}
		g := &gatedSaves{gate: make(chan struct{})}
		look := &fakeTool{name: "look", readOnly: true, idempotent: true}
		done := runAhead(t, m, g, look)
		synctest.Wait()
		if n := m.count(); n != 2 {
			t.Errorf("the model was asked %d times while the step's save was written, want 2", n)
		}
		releaseHeld(t, g, done)
		if g.overlap {
			t.Error("two saves were written at once")
		}
		var steps []int
		var statuses []agent.Status
		for _, st := range g.saved {
			steps, statuses = append(steps, st.Step), append(statuses, st.Status)
		}
		if len(g.saved) != 3 || steps[1] != 1 || statuses[2] != agent.StatusCompleted {
			t.Errorf("saves of steps %v, statuses %v; want the start, step 1 as it ended, and the completed run", steps, statuses)
		}
	})
}

// TestSaveAheadRefusedDropsTheReply refuses the save of a step's end: the run stops with
// ErrCheckpoint, and the tool the model asked for meanwhile does not run.
func TestSaveAheadRefusedDropsTheReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &replies{msgs: []agent.Message{toolCall("c1", "look"), toolCall("c2", "look")}}
		disk := errors.New("no space left on device")
		g := &gatedSaves{gate: make(chan struct{}), fail: disk}
		look := &fakeTool{name: "look", readOnly: true, idempotent: true}
		done := runAhead(t, m, g, look)
		synctest.Wait()
		close(g.gate)
		err := <-done
		if !errors.Is(err, agent.ErrCheckpoint) || !errors.Is(err, disk) {
			t.Fatalf("run = %v, want ErrCheckpoint with the store's error", err)
		}
		if n := look.calls.Load(); n != 1 {
			t.Errorf("look ran %d times, want once: not for the reply that came while its step's save was refused", n)
		}
	})
}

// TestSaveAheadIsWrittenBeforeTheNextSave cancels a run while the save of its step's end is
// held: the cancel's save waits for it, and the run returns only after both are written, in
// order.
func TestSaveAheadIsWrittenBeforeTheNextSave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		answered := make(chan struct{})
		m := agent.Model(modelFunc(func(ctx context.Context, req agent.Request) (agent.Reply, error) {
			select {
			case <-answered:
				<-ctx.Done()
				return agent.Reply{}, ctx.Err()
			default:
				close(answered)
				return agent.Reply{Message: toolCall("c1", "look")}, nil
			}
		}))
		g := &gatedSaves{gate: make(chan struct{})}
		look := &fakeTool{name: "look", readOnly: true, idempotent: true}
		ag := newAgent(t, m, agent.Config{NoProgressSteps: -1}, []agent.Tool{look})
		st := agent.NewState("run-ahead", "look", nil, time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
		done := make(chan error, 1)
		go func() { done <- ag.Run(ctx, st, agent.Hooks{Checkpoint: g.checkpoint, SaveAhead: true}) }()
		synctest.Wait()
		cancel(agent.ErrCancelled)
		synctest.Wait()
		releaseHeld(t, g, done)
		if g.overlap {
			t.Error("the cancel's save was written while the step's was")
		}
		last := g.saved[len(g.saved)-1]
		if len(g.saved) != 3 || g.saved[1].Step != 1 || last.Status != agent.StatusCancelled {
			t.Errorf("%d saves, the last %s; want the start, step 1, then the cancel", len(g.saved), last.Status)
		}
	})
}

// TestSaveAheadIsWrittenBeforeAPause has a person pause the run at the step boundary whose
// save is held: the pause's save is written after it, never beside it.
func TestSaveAheadIsWrittenBeforeAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &replies{msgs: []agent.Message{toolCall("c1", "look"), {Role: agent.RoleAssistant, Content: "Done."}}}
		g := &gatedSaves{gate: make(chan struct{})}
		look := &fakeTool{name: "look", readOnly: true, idempotent: true}
		ag := newAgent(t, m, agent.Config{NoProgressSteps: -1}, []agent.Tool{look})
		st := agent.NewState("run-ahead", "look", nil, time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
		var asked int
		hold := func(context.Context) (string, error) {
			asked++
			if asked == 2 { // the boundary after step 1
				return "bob", nil
			}
			return "", nil
		}
		done := make(chan error, 1)
		go func() {
			done <- ag.Run(context.Background(), st, agent.Hooks{Checkpoint: g.checkpoint, SaveAhead: true, Hold: hold})
		}()
		synctest.Wait()
		close(g.gate)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if g.overlap {
			t.Error("the pause's save was written while the step's was")
		}
		last := g.saved[len(g.saved)-1]
		if len(g.saved) != 3 || g.saved[1].Step != 1 || last.Status != agent.StatusAwaitingInput {
			t.Errorf("%d saves, the last %s; want the start, step 1, then the pause", len(g.saved), last.Status)
		}
	})
}
