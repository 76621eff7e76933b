package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// acceptingRecorder is a recorder that accepts events as bot.Bot does: each call is one
// transaction, and an ID already accepted is not added again.
type acceptingRecorder struct {
	*recorder
	mu     sync.Mutex
	calls  [][]string      // the event IDs of each Accept call: one commit each
	seen   map[string]bool // accepted so far
	fail   func(evs []bot.Event) error
	called chan []string
}

func newAcceptingRecorder() *acceptingRecorder {
	return &acceptingRecorder{recorder: newRecorder(), seen: map[string]bool{}, called: make(chan []string, 1024)}
}

func (r *acceptingRecorder) Accept(ctx context.Context, evs []bot.Event) ([]bool, error) {
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	r.called <- ids
	r.mu.Lock()
	fail := r.fail
	r.mu.Unlock()
	if fail != nil {
		if err := fail(evs); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, ids)
	added := make([]bool, len(evs))
	for i, id := range ids {
		added[i] = !r.seen[id]
		r.seen[id] = true
	}
	return added, nil
}

// TestSocketAckOnlyAfterAccept fails Accept for one envelope, as a full disk would, and
// lets the next one through: the first is never acknowledged (Slack delivers it again) nor
// handled. Acks are read in the order they are written on the one connection, so were an
// envelope acknowledged before its Accept returned, env-1's ack would come first.
func TestSocketAckOnlyAfterAccept(t *testing.T) {
	f := newFakeSlack(t)
	rec := newAcceptingRecorder()
	rec.fail = func(evs []bot.Event) error {
		if slices.ContainsFunc(evs, func(ev bot.Event) bool { return ev.ID == "Ev1" }) {
			return errors.New("store update: no space left on device")
		}
		return nil
	}
	f.adapter(rec, Config{})
	f.conn()
	f.send("events_api", "env-1", mentionCallback("Ev1", "C1", "1700000000.000100", "", "<@UBOT> go"))
	if ids := <-rec.called; !slices.Equal(ids, []string{"Ev1"}) {
		t.Fatalf("accepted %v, want [Ev1]", ids)
	}
	f.send("events_api", "env-2", mentionCallback("Ev2", "C1", "1700000000.000200", "", "<@UBOT> go"))
	if a := f.nextAck(); a.EnvelopeID != "env-2" {
		t.Fatalf("first ack for %q, want env-2: env-1 was acknowledged though it was not accepted", a.EnvelopeID)
	}
	if ev := rec.next(t); ev.ID != "Ev2" {
		t.Fatalf("handled %q, want Ev2", ev.ID)
	}
	if got := f.Unacked(); !slices.Equal(got, []string{"env-1"}) {
		t.Errorf("unacknowledged %v, want [env-1]", got)
	}
	rec.none(t)
}

// TestSocketBurstAcceptedInFewCommits holds the first Accept while a burst arrives: the
// envelopes waiting meanwhile are accepted together, in a few calls (transactions, one disk
// sync each) rather than one each, and each is acknowledged and handled once. (The reader
// may have decoded the whole burst before the acker took its first batch: one call.)
func TestSocketBurstAcceptedInFewCommits(t *testing.T) {
	const n = 100
	f := newFakeSlack(t)
	rec := newAcceptingRecorder()
	rec.recorder.events = make(chan bot.Event, n)
	// The first Accept is held until the rest of the burst waits, decoded, behind it.
	var (
		mu               sync.Mutex
		held, waiting    int
		rest             = make(chan struct{})
		restOnce, holdOn sync.Once
	)
	check := func() {
		if held > 0 && held+waiting == n {
			restOnce.Do(func() { close(rest) })
		}
	}
	rec.fail = func(evs []bot.Event) error {
		holdOn.Do(func() {
			mu.Lock()
			held = len(evs)
			check()
			mu.Unlock()
			select {
			case <-rest:
			case <-time.After(fakeWait): // the test fails below: the burst never queued up
			}
		})
		return nil
	}
	f.adapter(rec, Config{}, func(a *Adapter) {
		a.decoded = func(w int) {
			mu.Lock()
			waiting = w
			check()
			mu.Unlock()
		}
	})
	f.conn()
	for i := range n {
		ts := fmt.Sprintf("1700000000.%06d", i+1)
		f.send("events_api", fmt.Sprintf("env-%d", i), mentionCallback(fmt.Sprintf("Ev%d", i), "C1", ts, "", "<@UBOT> go"))
	}
	f.wait("not every envelope acknowledged", func() bool { return len(f.Acks()) == n })
	handled := map[string]int{}
	for range n {
		handled[rec.next(t).ID]++
	}
	if len(handled) != n {
		t.Errorf("handled %d distinct events, want %d", len(handled), n)
	}
	rec.none(t)
	rec.mu.Lock()
	calls := len(rec.calls)
	rec.mu.Unlock()
	t.Logf("%d envelopes accepted in %d calls", n, calls)
	if calls > 2 {
		t.Errorf("%d envelopes accepted in %d calls, want at most 2: the first, and the rest that arrived while it was committed", n, calls)
	}
}

// TestSocketRedeliveryOfAcceptedEvent: a redelivery of an event that is waiting in the
// inbox is acknowledged and not handled a second time.
func TestSocketRedeliveryOfAcceptedEvent(t *testing.T) {
	f := newFakeSlack(t)
	rec := newAcceptingRecorder()
	f.adapter(rec, Config{})
	f.conn()
	cb := mentionCallback("Ev7", "C1", "1700000000.000100", "", "<@UBOT> go")
	f.send("events_api", "env-a", cb)
	f.nextAck()
	f.send("events_api", "env-b", cb)
	if a := f.nextAck(); a.EnvelopeID != "env-b" {
		t.Fatalf("ack %q, want env-b", a.EnvelopeID)
	}
	if ev := rec.next(t); ev.ID != "Ev7" {
		t.Fatalf("handled %q", ev.ID)
	}
	rec.none(t)
}

// TestHTTPAcceptThenRespond: in HTTP mode an event is accepted before Slack gets its 200; an
// event the handler could not store is answered 503 (Slack retries it) and not handled, and
// a retry of an event waiting to be handled is answered 200 and not handled again.
func TestHTTPAcceptThenRespond(t *testing.T) {
	f := newFakeSlack(t)
	rec := newAcceptingRecorder()
	rec.fail = func(evs []bot.Event) error {
		if evs[0].ID == "Ev-full" {
			return errors.New("store update: no space left on device")
		}
		return nil
	}
	base := serveHTTP(t, f, rec)
	deliver := func(id string) int {
		t.Helper()
		body, err := json.Marshal(mentionCallback(id, "C1", "1700000000.000100", "", "<@UBOT> go"))
		if err != nil {
			t.Fatal(err)
		}
		code, _ := post(t, base+PathEvents, "application/json", string(body), sign(string(body), time.Now(), secret))
		return code
	}
	if code := deliver("Ev-full"); code != http.StatusServiceUnavailable {
		t.Errorf("an event that could not be stored: %d, want 503", code)
	}
	if code := deliver("Ev-ok"); code != http.StatusOK {
		t.Errorf("a stored event: %d, want 200", code)
	}
	if code := deliver("Ev-ok"); code != http.StatusOK {
		t.Errorf("a retry of a stored event: %d, want 200", code)
	}
	if ev := rec.next(t); ev.ID != "Ev-ok" {
		t.Fatalf("handled %q, want Ev-ok", ev.ID)
	}
	rec.none(t)
}
