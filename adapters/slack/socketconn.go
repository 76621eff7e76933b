package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
)

// The Socket Mode connection.
//
// loopbot keeps its own receiving loop on gorilla/websocket (the library slack-go's
// socketmode client uses) rather than that client: the client decodes every payload into
// slack-go's types, twice, and hands each envelope through two goroutines before the app
// sees it, which made the receiving loop too slow for a burst (about 70 µs an envelope,
// against Slack writing one every 30). Here a frame's envelope fields are read in one pass
// (envelope.go) and its payload goes to the adapter's own decoder. slack-go still opens the
// connection (apps.connections.open).
//
// The protocol (https://api.slack.com/apis/connections/socket-implement): Slack says hello
// on a new connection; it sends disconnect (refresh_requested, warning, link_disabled)
// before it closes one, and the app opens a new one; it pings, and an app that hears no ping
// for a while takes the connection for dead; every envelope is acknowledged by its
// envelope_id, or Slack delivers it again.

// Socket Mode timings.
const (
	// socketPingTimeout is how long the connection may go without a ping from Slack before
	// it is taken for dead and replaced (slack-go's default).
	socketPingTimeout = 30 * time.Second
	// socketWriteTimeout bounds the writing of one acknowledgement.
	socketWriteTimeout = 10 * time.Second
	// socketHandshakeTimeout bounds the WebSocket handshake.
	socketHandshakeTimeout = 45 * time.Second
	// socketWriteBuffer holds the largest acknowledgement Slack takes (20 KB) in one frame:
	// Slack drops a response split into continuation frames.
	socketWriteBuffer = 32 * 1024
	// socketRetryMin and socketRetryMax bound the wait before opening a connection again
	// after a failure.
	socketRetryMin = 100 * time.Millisecond
	socketRetryMax = time.Minute
)

// maxKeptFrameBuffer is the largest read buffer kept from one frame to the next: an
// unusually large frame's is let go.
const maxKeptFrameBuffer = 256 * 1024

// errDisconnect ends a connection's reading when Slack asks the app to reconnect.
var errDisconnect = errors.New("slack asked to reconnect")

// socketClient keeps one Socket Mode connection open at a time and writes the
// acknowledgements on it.
type socketClient struct {
	a *Adapter
	// pingTimeout is socketPingTimeout, shorter in tests.
	pingTimeout time.Duration

	mu    sync.Mutex
	cur   *socketConn // nil between connections
	conns int
}

// socketConn is one WebSocket connection.
type socketConn struct {
	ws *websocket.Conn
	// out is the network connection under ws, which holds the acks of a batch so that
	// they go out in one write.
	out *batchConn
	n   int
	// wmu serializes writes: gorilla/websocket allows one writer at a time (pongs are
	// control frames, which it lets through concurrently). ackBuf, which holds each ack's
	// JSON on its way out, is the writer's.
	wmu    sync.Mutex
	ackBuf []byte
}

func newSocketClient(a *Adapter) *socketClient {
	timeout := socketPingTimeout
	if a.pingTimeout > 0 {
		timeout = a.pingTimeout
	}
	return &socketClient{a: a, pingTimeout: timeout}
}

// run opens connections one after another until ctx ends, and hands each envelope that
// arrives on them to deliver, in the order received. It returns nil when ctx ends, and an
// error when Slack refuses the app token.
func (c *socketClient) run(ctx context.Context, deliver func(envelope)) error {
	wait := socketRetryMin
	for {
		conn, err := c.open(ctx)
		switch {
		case ctx.Err() != nil:
			if conn != nil {
				c.drop(conn)
			}
			return nil
		case err != nil && refused(err):
			return fmt.Errorf("apps.connections.open: %w", err)
		case err != nil:
			// Half to all of wait, so that replicas do not come back in step; at least
			// what Slack asked for when it rate-limits the call.
			pause := wait/2 + rand.N(wait/2+1)
			if rl, ok := errors.AsType[*slack.RateLimitedError](err); ok {
				pause = max(pause, rl.RetryAfter)
			}
			c.a.log.Warn("slack: socket mode connection failed; trying again", "in", pause, "err", logSafe(err))
			wait = min(2*wait, socketRetryMax)
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			continue
		}
		wait = socketRetryMin
		err = c.read(ctx, conn, deliver)
		c.drop(conn)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errDisconnect) {
			c.a.log.Info("slack: socket mode connection refreshed", "connection", conn.n)
		} else {
			c.a.log.Warn("slack: socket mode connection lost; reconnecting", "connection", conn.n, "err", logSafe(err))
		}
	}
}

// refused reports whether apps.connections.open refused the app token, which no retry
// mends.
func refused(err error) bool {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "invalid_auth", "not_authed", "account_inactive", "token_revoked", "not_allowed_token_type":
			return true
		}
	}
	var code slack.StatusCodeError
	return errors.As(err, &code) && (code.Code == http.StatusNotFound || code.Code == http.StatusUnauthorized)
}

// open asks Slack for a connection URL and dials it.
func (c *socketClient) open(ctx context.Context) (*socketConn, error) {
	_, url, err := c.a.api.StartSocketModeContext(ctx)
	if err != nil {
		return nil, err
	}
	var out *batchConn
	d := websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: socketHandshakeTimeout,
		WriteBufferSize:  socketWriteBuffer,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var nd net.Dialer
			nc, err := nd.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			out = &batchConn{Conn: nc}
			return out, nil
		},
	}
	// Slack's WebSocket front end expects the Origin of its own site, as slack-go sends.
	ws, resp, err := d.DialContext(ctx, url, http.Header{"Origin": {"https://api.slack.com"}})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("dial socket mode url: %w", err)
	}
	c.mu.Lock()
	c.conns++
	conn := &socketConn{ws: ws, out: out, n: c.conns}
	c.cur = conn
	c.mu.Unlock()
	return conn, nil
}

// drop forgets conn as the current connection and closes it.
func (c *socketClient) drop(conn *socketConn) {
	c.mu.Lock()
	if c.cur == conn {
		c.cur = nil
	}
	c.mu.Unlock()
	conn.close()
}

func (conn *socketConn) close() { _ = conn.ws.Close() }

// read hands conn's envelopes to deliver until the connection fails, Slack asks for a new
// one (errDisconnect), Slack stops pinging, or ctx ends.
func (c *socketClient) read(ctx context.Context, conn *socketConn, deliver func(envelope)) error {
	stop := context.AfterFunc(ctx, conn.close)
	defer stop()
	ws := conn.ws
	// Each ping from Slack moves the read deadline on: a connection that has gone quiet
	// fails its read when the deadline passes.
	_ = ws.SetReadDeadline(time.Now().Add(c.pingTimeout))
	ws.SetPingHandler(func(data string) error {
		_ = ws.SetReadDeadline(time.Now().Add(c.pingTimeout))
		err := ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(socketWriteTimeout))
		if err != nil && !errors.Is(err, websocket.ErrCloseSent) {
			return err
		}
		return nil
	})
	// Every frame is read into the one buffer: deliver is done with the envelope (whose
	// payload is a slice of it) before the next frame is read.
	var buf bytes.Buffer
	for {
		_, r, err := ws.NextReader()
		if err != nil {
			return err
		}
		if buf.Cap() > maxKeptFrameBuffer {
			buf = bytes.Buffer{}
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			return err
		}
		frame := buf.Bytes()
		e, err := decodeEnvelope(frame)
		if err != nil {
			c.a.log.Warn("slack: undecodable socket mode frame dropped", "err", err, "bytes", len(frame))
			continue
		}
		switch e.Type {
		case "hello":
			c.a.log.Debug("slack: socket mode connected", "connection", conn.n)
		case "disconnect":
			// refresh_requested and warning: the connection is about to end. link_disabled:
			// Socket Mode was turned off for the app, and opening a new connection says so
			// (and is tried again, in case it is turned back on).
			c.a.log.Info("slack: socket mode disconnect", "reason", e.Reason, "connection", conn.n)
			return errDisconnect
		default:
			deliver(e)
		}
	}
}

// ackFrame is one acknowledgement: an envelope's ID, and the payload that answers it
// (a slash command's reply) or nil.
type ackFrame struct {
	envelopeID string
	payload    any
}

// ack writes the acknowledgements of a batch on the connection open now, in one write to
// the socket (one system call on each side instead of one an ack). An envelope not
// acknowledged is delivered again by Slack, on this connection or the next, so a failed
// write needs nothing more than its error, which is for all of them: a write that fails
// may have sent some.
func (c *socketClient) ack(acks []ackFrame) error {
	c.mu.Lock()
	conn := c.cur
	c.mu.Unlock()
	if conn == nil {
		return errors.New("write ack: no socket mode connection")
	}
	conn.wmu.Lock()
	defer conn.wmu.Unlock()
	conn.out.hold()
	// One deadline for the batch, which goes out in one write at the flush.
	_ = conn.ws.SetWriteDeadline(time.Now().Add(socketWriteTimeout))
	for _, a := range acks {
		b, err := appendAck(conn.ackBuf[:0], a)
		if err != nil {
			_ = conn.out.flush()
			return err
		}
		conn.ackBuf = b
		if err := conn.ws.WriteMessage(websocket.TextMessage, b); err != nil {
			_ = conn.out.flush()
			return fmt.Errorf("write ack: %w", err)
		}
	}
	if err := conn.out.flush(); err != nil {
		return fmt.Errorf("write ack: %w", err)
	}
	return nil
}

// appendAck appends the JSON of one acknowledgement, {"envelope_id":…,"payload":…}, to b.
// The ID is quoted as JSON quotes a string; the payload (rare: a slash command's reply) is
// marshalled.
func appendAck(b []byte, a ackFrame) ([]byte, error) {
	b = append(b, `{"envelope_id":`...)
	q, err := jsontext.AppendQuote(b, a.envelopeID)
	if err != nil {
		// Invalid UTF-8, which the envelope's decoding already replaced: encoding/json
		// writes it as that did.
		id, err := json.Marshal(a.envelopeID)
		if err != nil {
			return nil, fmt.Errorf("encode ack: %w", err)
		}
		q = append(b, id...)
	}
	b = q
	if a.payload != nil {
		p, err := json.Marshal(a.payload)
		if err != nil {
			return nil, fmt.Errorf("encode ack: %w", err)
		}
		b = append(b, `,"payload":`...)
		b = append(b, p...)
	}
	return append(b, '}'), nil
}

// batchConn is a network connection whose writes can be held and sent together. What is
// written while nothing is held (a pong) goes out at once; a pong written while a batch
// is held goes out with it.
type batchConn struct {
	net.Conn
	mu      sync.Mutex
	holding bool
	buf     []byte
	// deadline is the write deadline set while holding (if deadlineSet), for the flush.
	deadline    time.Time
	deadlineSet bool
}

func (c *batchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holding {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// SetWriteDeadline, while writes are held, keeps the deadline for the flush's write:
// gorilla/websocket sets it before every frame, and a batch of acks is hundreds of frames,
// each deadline a change of a runtime timer.
func (c *batchConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holding {
		c.deadline, c.deadlineSet = t, true
		return nil
	}
	return c.Conn.SetWriteDeadline(t)
}

// hold keeps the writes until flush.
func (c *batchConn) hold() {
	c.mu.Lock()
	c.holding = true
	c.mu.Unlock()
}

// flush writes what was held, and stops holding.
func (c *batchConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = false
	deadline, set := c.deadline, c.deadlineSet
	c.deadline, c.deadlineSet = time.Time{}, false
	if len(c.buf) == 0 {
		return nil
	}
	if set {
		if err := c.Conn.SetWriteDeadline(deadline); err != nil {
			c.buf = c.buf[:0]
			return err
		}
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}
