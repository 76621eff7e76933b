package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// gate is a Handler that holds one event until released and reports every event it
// handled, in the order it handled them.
type gate struct {
	hold    string
	held    chan struct{} // closed when Handle starts holding the event
	release chan struct{}
	opened  sync.Once
	handled chan bot.Event
}

func newGate(hold string) *gate {
	return &gate{hold: hold, held: make(chan struct{}), release: make(chan struct{}), handled: make(chan bot.Event, 1024)}
}

func (g *gate) Handle(ctx context.Context, ev bot.Event) (bot.Result, error) {
	if ev.ID == g.hold {
		close(g.held)
		<-g.release
	}
	g.handled <- ev
	return bot.Result{}, nil
}

// open releases the held event; it may be called more than once. Tests also call it at
// cleanup, before Run is stopped, so that a failing test does not leave Run waiting for a
// worker.
func (g *gate) open() { g.opened.Do(func() { close(g.release) }) }

// waitHeld waits until Handle holds the gate's event.
func (g *gate) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-g.held:
	case <-time.After(fakeWait):
		t.Fatalf("Handle was not given %s", g.hold)
	}
}

// next returns the next event handled.
func (g *gate) next(t *testing.T) bot.Event {
	t.Helper()
	select {
	case ev := <-g.handled:
		return ev
	case <-time.After(fakeWait):
		t.Fatal("Handle was not called")
		return bot.Event{}
	}
}

// burstThread is a thread the burst tests send mentions in.
type burstThread struct {
	name, channel, ts string
	sent              []string // event IDs, in the order sent
}

func (b *burstThread) ref() bot.ThreadRef {
	return bot.ThreadRef{Platform: platform, Workspace: teamID, Channel: b.channel, Thread: b.ts}
}

// mention sends the thread's next mention, in the thread, and returns its envelope ID.
func (b *burstThread) mention(f *fakeSlack) string {
	f.t.Helper()
	n := len(b.sent)
	id := fmt.Sprintf("Ev-%s-%03d", b.name, n)
	b.sent = append(b.sent, id)
	env := "env-" + id
	ts := fmt.Sprintf("1700000001.%06d", n)
	f.send("events_api", env, mentionCallback(id, b.channel, ts, b.ts, "<@UBOT> step "+fmt.Sprint(n)))
	return env
}

// threadsAround returns blocked, a thread in the same worker as it and two threads in
// other workers: the threads a burst needs to show both that a held thread holds up only
// its worker and that nothing holds up the acknowledgements.
func threadsAround(t *testing.T) (blocked, sameWorker *burstThread, others []*burstThread) {
	t.Helper()
	blocked = &burstThread{name: "blocked", channel: "C1", ts: "1700000000.000001"}
	w := workerOf(blocked.ref())
	for i := 2; i < 100 && (sameWorker == nil || len(others) < 2); i++ {
		th := &burstThread{channel: fmt.Sprintf("C%d", i), ts: blocked.ts}
		switch {
		case workerOf(th.ref()) == w && sameWorker == nil:
			th.name, sameWorker = "same", th
		case workerOf(th.ref()) != w && len(others) < 2:
			th.name = fmt.Sprintf("other%d", len(others))
			others = append(others, th)
		}
	}
	if sameWorker == nil || len(others) < 2 {
		t.Fatal("no threads found in the workers the test needs")
	}
	return blocked, sameWorker, others
}

// TestSocketBurstIsAcknowledgedWhileAThreadIsBlocked holds Handle on a thread's first
// mention and sends hundreds more envelopes: of that thread, of another thread its worker
// also serves, and of threads of other workers. Every one is acknowledged while Handle
// still holds (far more than any fixed queue between the socket and the workers holds), the
// other workers' threads are handled meanwhile, and once released each thread's events
// are handled in the order sent, each once.
func TestSocketBurstIsAcknowledgedWhileAThreadIsBlocked(t *testing.T) {
	f := newFakeSlack(t)
	blocked, same, others := threadsAround(t)
	g := newGate("Ev-blocked-000")
	f.adapter(g, Config{})
	t.Cleanup(g.open)
	f.conn()

	blocked.mention(f)
	g.waitHeld(t)
	const perThread = 100
	threads := append([]*burstThread{blocked, same}, others...)
	for range perThread {
		for _, th := range threads {
			th.mention(f)
		}
	}
	total := 1 + len(threads)*perThread
	f.wait(fmt.Sprintf("all %d envelopes acknowledged while Handle held one thread", total), func() bool { return len(f.Acks()) >= total })
	for _, a := range f.Acks() {
		if a.Deliveries != 1 || a.Connection != 1 {
			t.Errorf("ack of %s: delivery %d on connection %d, want the first delivery on the first connection", a.EnvelopeID, a.Deliveries, a.Connection)
		}
	}

	got := map[string][]string{}
	record := func(ev bot.Event) {
		key := ev.Thread.Channel + "/" + ev.Thread.Thread
		got[key] = append(got[key], ev.ID)
	}
	// The other workers do not wait for the held thread.
	for range len(others) * perThread {
		ev := g.next(t)
		if ev.Thread.Channel == blocked.channel || ev.Thread.Channel == same.channel {
			t.Fatalf("%s handled while its worker was held", ev.ID)
		}
		record(ev)
	}
	select {
	case ev := <-g.handled:
		t.Fatalf("%s handled while its worker was held", ev.ID)
	default:
	}

	g.open()
	for range 1 + 2*perThread {
		record(g.next(t))
	}
	for _, th := range threads {
		key := th.channel + "/" + th.ts
		if !slices.Equal(got[key], th.sent) {
			t.Errorf("thread %s handled %v,\nwant %v", th.name, got[key], th.sent)
		}
	}
	select {
	case ev := <-g.handled:
		t.Errorf("%s handled again", ev.ID)
	default:
	}
}

// logBuffer is a log destination a test can read, which also goes to t.Log.
type logBuffer struct {
	t  *testing.T
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSocketOverCapIsLeftForRedelivery fills the queue of a held thread's worker (two
// events, in this test): the next envelope of that worker is not acknowledged, with a
// warning, while another worker's envelope after it is. Slack delivers the unacknowledged
// one again on the next connection, and by then there is room: it is acknowledged and
// handled after the thread's earlier events, so nothing is lost.
func TestSocketOverCapIsLeftForRedelivery(t *testing.T) {
	f := newFakeSlack(t)
	blocked, _, others := threadsAround(t)
	g := newGate("Ev-blocked-000")
	logs := &logBuffer{t: t}
	f.adapter(g, Config{}, WithLogger(slog.New(slog.NewTextHandler(logs, nil))), func(a *Adapter) { a.queueCap = 2 })
	t.Cleanup(g.open)
	f.conn()

	blocked.mention(f)
	g.waitHeld(t)
	blocked.mention(f)
	blocked.mention(f)
	over := blocked.mention(f)
	other := others[0].mention(f)
	// Envelopes are taken in the order sent, and their acks written in that order: once the
	// later envelope's ack is read, the decision on the one over the cap was made.
	f.wait("ack of "+other, func() bool {
		return slices.ContainsFunc(f.Acks(), func(a ack) bool { return a.EnvelopeID == other })
	})
	if unacked := f.Unacked(); !slices.Equal(unacked, []string{over}) {
		t.Fatalf("unacknowledged envelopes %v, want only %s, the one over the cap", unacked, over)
	}
	if !strings.Contains(logs.String(), "envelope left unacknowledged") || !strings.Contains(logs.String(), over) {
		t.Errorf("no warning about %s in the log:\n%s", over, logs)
	}
	if ev := g.next(t); ev.ID != others[0].sent[0] {
		t.Fatalf("handled %s, want %s of the other worker", ev.ID, others[0].sent[0])
	}

	g.open()
	var got []string
	for range 3 {
		got = append(got, g.next(t).ID)
	}
	if err := f.DropConnection(); err != nil {
		t.Fatal(err)
	}
	f.conn()
	f.wait("ack of the redelivered "+over, func() bool { return len(f.Unacked()) == 0 })
	// One more event: had the envelope over the cap been queued as well, the thread's
	// events would show it twice before this one.
	blocked.mention(f)
	for range 2 {
		got = append(got, g.next(t).ID)
	}
	if !slices.Equal(got, blocked.sent) {
		t.Errorf("thread handled %v, want %v", got, blocked.sent)
	}
	if a, err := f.WaitAck(t.Context(), over); err != nil || a.Deliveries != 2 || a.Connection != 2 {
		t.Errorf("ack %+v (%v), want %s acknowledged at its second delivery, on the second connection", a, err, over)
	}
}

// TestSocketAcknowledgedAreHandledWhenRunStops stops Run while Handle holds a thread's
// first event and two more of the thread wait behind it, acknowledged: Run returns only
// after all three were handled.
func TestSocketAcknowledgedAreHandledWhenRunStops(t *testing.T) {
	f := newFakeSlack(t)
	blocked, _, _ := threadsAround(t)
	g := newGate("Ev-blocked-000")
	a, err := New(Config{BotToken: "xoxb-test", AppToken: "xapp-1-test", APIURL: f.apiURL()},
		WithLogger(slog.New(slog.NewTextHandler(testWriter{t}, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	stopped := make(chan struct{})
	go func() {
		runErr = a.Run(ctx, g)
		close(stopped)
	}()
	t.Cleanup(func() {
		g.open()
		cancel()
		<-stopped
	})
	f.conn()

	for range 3 {
		blocked.mention(f)
	}
	g.waitHeld(t)
	f.wait("three acks", func() bool { return len(f.Acks()) == 3 })
	cancel()
	// Run has closed its connection: it is stopping, with two events still queued.
	f.wait("the connection closed", func() bool { return !f.Connected() })
	select {
	case <-stopped:
		t.Fatalf("Run returned (%v) with acknowledged events not handled", runErr)
	default:
	}
	g.open()
	select {
	case <-stopped:
		if runErr != nil {
			t.Fatalf("Run: %v", runErr)
		}
	case <-time.After(fakeWait):
		t.Fatal("Run did not return")
	}
	var got []string
	for range 3 {
		got = append(got, g.next(t).ID)
	}
	if !slices.Equal(got, blocked.sent) {
		t.Errorf("handled %v, want %v", got, blocked.sent)
	}
}

// TestHTTPOverCapIsBusy fills the queue of a held thread's worker in HTTP mode (one event,
// in this test): the next event of that worker is answered 503 with a Retry-After, and is
// not handled, so Slack's retry is the one delivery of it; the retry, once there is room,
// is taken and handled after the thread's earlier events and before its later ones.
func TestHTTPOverCapIsBusy(t *testing.T) {
	f := newFakeSlack(t)
	blocked, _, _ := threadsAround(t)
	g := newGate("Ev-blocked-000")
	base := serveHTTP(t, f, g, func(a *Adapter) { a.queueCap = 1 })
	t.Cleanup(g.open)

	deliver := func(n int) (int, http.Header) {
		t.Helper()
		id := fmt.Sprintf("Ev-blocked-%03d", n)
		if n == len(blocked.sent) {
			blocked.sent = append(blocked.sent, id)
		}
		body, err := json.Marshal(mentionCallback(id, blocked.channel, fmt.Sprintf("1700000001.%06d", n), blocked.ts, "<@UBOT> go"))
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, base+PathEvents, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = sign(string(body), time.Now(), secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	if code, _ := deliver(0); code != http.StatusOK {
		t.Fatalf("first event answered %d, want 200", code)
	}
	g.waitHeld(t)
	if code, _ := deliver(1); code != http.StatusOK {
		t.Fatalf("second event answered %d, want 200: the queue has room for one", code)
	}
	if code, h := deliver(2); code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Fatalf("third event answered %d (Retry-After %q), want 503 with a Retry-After", code, h.Get("Retry-After"))
	}
	g.open()
	var got []string
	for range 2 {
		got = append(got, g.next(t).ID)
	}
	if code, _ := deliver(2); code != http.StatusOK {
		t.Fatalf("the retry of the third event answered %d, want 200", code)
	}
	// The retry is taken off the queue, which has room for one, before the next event comes.
	got = append(got, g.next(t).ID)
	// One more event: had the refused delivery been queued as well, the thread's events
	// would show it twice before this one.
	if code, _ := deliver(3); code != http.StatusOK {
		t.Fatalf("fourth event answered %d, want 200", code)
	}
	got = append(got, g.next(t).ID)
	if !slices.Equal(got, blocked.sent) {
		t.Errorf("handled %v, want %v", got, blocked.sent)
	}
}
