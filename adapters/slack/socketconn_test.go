package slack

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/adapters/slack/slackfake"
)

// TestSocketAppTokenRefused: when apps.connections.open refuses the app token, Run returns
// the error instead of trying again for ever.
func TestSocketAppTokenRefused(t *testing.T) {
	f := newFakeSlack(t)
	f.FailNext("apps.connections.open", 1, slackfake.APIError("invalid_auth"))
	a, err := New(Config{BotToken: "xoxb-test", AppToken: "xapp-1-test", APIURL: f.apiURL()},
		WithLogger(slog.New(slog.NewTextHandler(testWriter{t}, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), fakeWait)
	defer cancel()
	err = a.Run(ctx, newRecorder())
	if err == nil || !strings.Contains(err.Error(), "invalid_auth") {
		t.Fatalf("Run: %v, want the refusal (invalid_auth)", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run kept trying a refused token")
	}
}

// TestSocketOpenRetried: a failure to open the connection that is not a refusal of the
// token is tried again, and the events then flow.
func TestSocketOpenRetried(t *testing.T) {
	f := newFakeSlack(t)
	f.FailNext("apps.connections.open", 2, slackfake.ServerError())
	rec := newRecorder()
	f.adapter(rec, Config{})
	f.conn()
	f.send("events_api", "env-1", mentionCallback("Ev1", "C1", "1700000000.000100", "", "<@UBOT> go"))
	if a := f.nextAck(); a.EnvelopeID != "env-1" {
		t.Fatalf("ack %q", a.EnvelopeID)
	}
	if ev := rec.next(t); ev.ID != "Ev1" {
		t.Fatalf("handled %q", ev.ID)
	}
	opens := 0
	for _, c := range f.Calls() {
		if c.Method == "apps.connections.open" {
			opens++
		}
	}
	if opens != 3 {
		t.Errorf("apps.connections.open called %d times, want 3 (two failures, then the connection)", opens)
	}
}

// TestSocketOpenRateLimited: when apps.connections.open is rate-limited, the next try waits
// at least the Retry-After Slack gave.
func TestSocketOpenRateLimited(t *testing.T) {
	f := newFakeSlack(t)
	f.FailNext("apps.connections.open", 1, slackfake.RateLimited(time.Second))
	f.adapter(newRecorder(), Config{})
	f.conn()
	var opens []call
	for _, c := range f.Calls() {
		if c.Method == "apps.connections.open" {
			opens = append(opens, c)
		}
	}
	if len(opens) != 2 {
		t.Fatalf("apps.connections.open called %d times, want 2", len(opens))
	}
	if gap := opens[1].At.Sub(opens[0].At); gap < time.Second {
		t.Errorf("tried again %v after the 429, want at least its Retry-After (1s)", gap)
	}
}

// TestSocketDisconnectReasons: after each of Slack's disconnect messages the adapter opens
// a new connection, and the envelopes sent on it are acknowledged on it and handled once.
func TestSocketDisconnectReasons(t *testing.T) {
	f := newFakeSlack(t)
	rec := newRecorder()
	f.adapter(rec, Config{})
	f.conn()
	for i, reason := range []string{"warning", "refresh_requested", "link_disabled"} {
		if err := f.SendDisconnect(reason); err != nil {
			t.Fatal(err)
		}
		f.conn()
		id := "Ev-" + reason
		f.send("events_api", "env-"+reason, mentionCallback(id, "C1", "1700000000.00010"+string(rune('0'+i)), "", "<@UBOT> go"))
		if a := f.nextAck(); a.EnvelopeID != "env-"+reason || a.Connection != i+2 {
			t.Fatalf("ack %q on connection %d, want env-%s on %d", a.EnvelopeID, a.Connection, reason, i+2)
		}
		if ev := rec.next(t); ev.ID != id {
			t.Fatalf("handled %q, want %s", ev.ID, id)
		}
	}
	rec.none(t)
}

// TestSocketSilentConnectionReplaced: a connection on which Slack has not pinged for the
// ping timeout is taken for dead and replaced. The fake pings every second, so a timeout
// well under that replaces each connection in turn.
func TestSocketSilentConnectionReplaced(t *testing.T) {
	f := newFakeSlack(t)
	rec := newRecorder()
	f.adapter(rec, Config{}, func(a *Adapter) { a.pingTimeout = 50 * time.Millisecond })
	f.wait("a silent connection was kept", func() bool { return f.Connections() >= 3 })
}

// TestSocketPingsKeepTheConnection: each ping from Slack moves the ping timeout on, so a
// connection that Slack pings more often than the timeout is kept. The fake pings every
// second; the timeout is 1.5 s and the test waits for three pings.
func TestSocketPingsKeepTheConnection(t *testing.T) {
	f := newFakeSlack(t)
	f.adapter(newRecorder(), Config{}, func(a *Adapter) { a.pingTimeout = 1500 * time.Millisecond })
	f.conn()
	f.wait("the fake did not ping three times", func() bool { return f.Pings() >= 3 })
	if n := f.Connections(); n != 1 {
		t.Errorf("%d connections, want 1: a pinged connection was taken for dead", n)
	}
}

// countingConn records the writes that reach the network, and the write deadlines set.
type countingConn struct {
	net.Conn
	writes    [][]byte
	deadlines []time.Time
}

func (c *countingConn) SetWriteDeadline(t time.Time) error {
	c.deadlines = append(c.deadlines, t)
	return nil
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, slices.Clone(p))
	return len(p), nil
}

// TestBatchConn: what is written while a batch is held reaches the network in one write at
// the flush, with the last write deadline set meanwhile; what is written otherwise goes out
// at once, as does its deadline.
func TestBatchConn(t *testing.T) {
	nc := &countingConn{}
	c := &batchConn{Conn: nc}
	t0 := time.Unix(1700000000, 0)
	if err := c.SetWriteDeadline(t0); err != nil || !slices.Equal(nc.deadlines, []time.Time{t0}) {
		t.Fatalf("a deadline outside a batch: deadlines %v, err %v; want it set at once", nc.deadlines, err)
	}
	if _, err := c.Write([]byte("pong")); err != nil || len(nc.writes) != 1 {
		t.Fatalf("a write outside a batch: %d writes, err %v; want it sent at once", len(nc.writes), err)
	}
	c.hold()
	for i, p := range []string{"ack1", "ack2", "ack3"} {
		if err := c.SetWriteDeadline(t0.Add(time.Duration(i+1) * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if len(nc.writes) != 1 || len(nc.deadlines) != 1 {
		t.Fatalf("%d writes and %d deadlines while held, want none sent", len(nc.writes)-1, len(nc.deadlines)-1)
	}
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}
	if len(nc.writes) != 2 || string(nc.writes[1]) != "ack1ack2ack3" {
		t.Errorf("writes %q, want the batch in one", nc.writes)
	}
	if want := []time.Time{t0, t0.Add(3 * time.Second)}; !slices.Equal(nc.deadlines, want) {
		t.Errorf("deadlines %v, want %v: the batch's write under the last one set", nc.deadlines, want)
	}
	if _, err := c.Write([]byte("pong")); err != nil || len(nc.writes) != 3 {
		t.Errorf("a write after the flush: %d writes, err %v; want it sent at once", len(nc.writes), err)
	}
	if err := c.SetWriteDeadline(t0); err != nil || len(nc.deadlines) != 3 {
		t.Errorf("a deadline after the flush: deadlines %v, err %v; want it set at once", nc.deadlines, err)
	}
}
