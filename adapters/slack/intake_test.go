package slack

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// intakeRig is an adapter whose recorder accepts events, with the second Accept (Ev2's)
// held until release is closed, and Ev1's Handle reporting whether Ev2 had been accepted
// by then.
type intakeRig struct {
	f            *fakeSlack
	rec          *acceptingRecorder
	handlingEv1  chan struct{} // closed when Ev1 reaches Handle
	release      chan struct{} // lets Ev2's Accept return; closed by letGo
	releaseOnce  sync.Once
	ev2Accepted  atomic.Bool
	ev2AtHandle1 atomic.Bool // Ev2 was accepted when Ev1 reached Handle
}

// newIntakeRig sends Ev1, then Ev2 once Ev1's Accept has begun, so that Ev2 is read and
// waits for its own Accept while Ev1 is acknowledged.
func newIntakeRig(t *testing.T, hold time.Duration) *intakeRig {
	r := &intakeRig{f: newFakeSlack(t), rec: newAcceptingRecorder(), handlingEv1: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	r.rec.before = func(ev bot.Event) error {
		if ev.ID == "Ev1" {
			r.ev2AtHandle1.Store(r.ev2Accepted.Load())
			once.Do(func() { close(r.handlingEv1) })
		}
		return nil
	}
	ev2Read := make(chan struct{})
	var readOnce sync.Once
	r.rec.fail = func(evs []bot.Event) error {
		switch {
		case slices.ContainsFunc(evs, func(ev bot.Event) bool { return ev.ID == "Ev1" }):
			// Ev1's Accept returns once Ev2 is read and waits behind it.
			select {
			case <-ev2Read:
			case <-time.After(fakeWait):
			}
		case slices.ContainsFunc(evs, func(ev bot.Event) bool { return ev.ID == "Ev2" }):
			<-r.release
			r.ev2Accepted.Store(true)
		}
		return nil
	}
	r.f.adapter(r.rec, Config{}, func(a *Adapter) {
		a.intakeHold = hold
		var decoded atomic.Int32
		a.decoded = func(int) {
			if decoded.Add(1) == 2 {
				readOnce.Do(func() { close(ev2Read) })
			}
		}
	})
	// A test that fails before it lets Ev2's Accept go must not leave Run waiting on it.
	t.Cleanup(r.letGo)
	r.f.conn()
	r.f.send("events_api", "env-1", mentionCallback("Ev1", "C1", "1700000000.000100", "", "<@UBOT> one"))
	if ids := <-r.rec.called; !slices.Equal(ids, []string{"Ev1"}) {
		t.Fatalf("accepted %v first, want [Ev1]", ids)
	}
	r.f.send("events_api", "env-2", mentionCallback("Ev2", "C2", "1700000000.000200", "", "<@UBOT> two"))
	return r
}

func (r *intakeRig) letGo() { r.releaseOnce.Do(func() { close(r.release) }) }

// TestSocketHandlingWaitsForTheAcks: an acknowledged event is not handed to the bot while
// an envelope read after it still waits for its acknowledgement.
func TestSocketHandlingWaitsForTheAcks(t *testing.T) {
	r := newIntakeRig(t, time.Hour)
	if a := r.f.nextAck(); a.EnvelopeID != "env-1" {
		t.Fatalf("ack %q, want env-1", a.EnvelopeID)
	}
	// Were Ev1 handed on now, Handle would see it before Ev2's Accept is let go.
	select {
	case <-r.handlingEv1:
		t.Fatal("Ev1 was handled while env-2 waited for its acknowledgement")
	case <-time.After(200 * time.Millisecond):
	}
	r.letGo()
	if a := r.f.nextAck(); a.EnvelopeID != "env-2" {
		t.Fatalf("ack %q, want env-2", a.EnvelopeID)
	}
	seen := map[string]bool{}
	for range 2 {
		seen[r.rec.next(t).ID] = true
	}
	if !seen["Ev1"] || !seen["Ev2"] || !r.ev2AtHandle1.Load() {
		t.Errorf("handled %v; Ev2 accepted when Ev1 was handled: %v", seen, r.ev2AtHandle1.Load())
	}
}

// TestSocketHoldRunsOut: the hold lasts intakeHold at most, so an envelope whose
// acknowledgement is slow does not stop the handling of the others.
func TestSocketHoldRunsOut(t *testing.T) {
	r := newIntakeRig(t, time.Millisecond)
	select {
	case <-r.handlingEv1:
	case <-time.After(fakeWait):
		t.Fatal("Ev1 was not handled while env-2 waited for its acknowledgement past the hold")
	}
	r.letGo()
	r.f.wait("env-2 not acknowledged", func() bool { return len(r.f.Acks()) == 2 })
	if r.ev2AtHandle1.Load() {
		t.Error("Ev2 was accepted before Ev1 was handled, want Ev1 handled while Ev2's Accept was held")
	}
}

// TestIntakeHold: the intake holds from the first envelope of a busy spell until nothing
// has been pending for the linger, or until the hold runs out, and not again until it has
// been idle. The bubble's clock makes the timers exact.
func TestIntakeHold(t *testing.T) {
	isOpen := func(in *intake) bool {
		synctest.Wait()
		in.mu.Lock()
		open := in.open
		in.mu.Unlock()
		select {
		case <-open:
			return true
		default:
			return false
		}
	}
	synctest.Test(t, func(t *testing.T) {
		in := newIntake(time.Hour, 2*time.Millisecond)
		if !isOpen(in) {
			t.Fatal("a new intake holds")
		}
		in.arrived()
		in.arrived()
		in.settled(1)
		if isOpen(in) {
			t.Error("open with one envelope pending")
		}
		in.settled(1)
		time.Sleep(time.Millisecond)
		if isOpen(in) {
			t.Error("open before nothing was pending for the linger")
		}
		// One more within the linger: the spell goes on.
		in.arrived()
		time.Sleep(5 * time.Millisecond)
		if isOpen(in) {
			t.Error("open with one envelope pending, after the linger of the one before")
		}
		in.settled(1)
		time.Sleep(2 * time.Millisecond)
		if !isOpen(in) {
			t.Error("held after nothing was pending for the linger")
		}

		short := newIntake(10*time.Millisecond, time.Hour)
		short.arrived()
		time.Sleep(10 * time.Millisecond)
		if !isOpen(short) {
			t.Fatal("the hold did not run out")
		}
		short.arrived()
		if !isOpen(short) {
			t.Error("held again in the same busy spell")
		}
		short.settled(2)
		short.arrived()
		if isOpen(short) {
			t.Error("not held in a new busy spell")
		}
		short.reset()
		if !isOpen(short) {
			t.Error("held after reset")
		}
	})
}
