package discordfake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gorilla/websocket"
)

// maxEvents bounds the events a session keeps for Resume.
const maxEvents = 1000

// Gateway opcodes the fake speaks.
const (
	opDispatch       = 0
	opHeartbeat      = 1
	opIdentify       = 2
	opResume         = 6
	opInvalidSession = 9
	opHello          = 10
	opHeartbeatAck   = 11
)

func (f *Server) gatewayURL() string { return "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/gw" }

// gateway serves one websocket connection: Hello, then Identify (READY) or Resume (the
// events the client missed, then RESUMED), then heartbeat acks until the connection ends.
func (f *Server) gateway(w http.ResponseWriter, r *http.Request) {
	f.gwMu.Lock()
	if f.closed {
		f.gwMu.Unlock()
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	f.gwWork.Add(1)
	f.gwMu.Unlock()
	defer f.gwWork.Done()

	up := websocket.Upgrader{}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	f.gwMu.Lock()
	if f.closed {
		f.gwMu.Unlock()
		c.Close()
		return
	}
	f.conns[c] = true
	err = c.WriteJSON(map[string]any{"op": opHello, "d": map[string]any{"heartbeat_interval": 45000}})
	f.gwMu.Unlock()
	defer func() {
		f.gwMu.Lock()
		delete(f.conns, c)
		if f.conn == c {
			f.conn = nil
		}
		f.gwMu.Unlock()
		c.Close()
	}()
	if err != nil {
		return
	}
	var first struct {
		Op int             `json:"op"`
		D  json.RawMessage `json:"d"`
	}
	if err := c.ReadJSON(&first); err != nil {
		return
	}
	kind, err := f.handshake(c, first.Op, first.D)
	if err != nil {
		f.fail(fmt.Errorf("gateway: %w", err))
		return
	}
	f.mu.Lock()
	f.handshakes = append(f.handshakes, kind)
	n := len(f.handshakes)
	f.notifyLocked()
	f.mu.Unlock()
	for {
		var m struct {
			Op int `json:"op"`
		}
		if err := c.ReadJSON(&m); err != nil {
			return
		}
		if m.Op != opHeartbeat {
			continue
		}
		f.gwMu.Lock()
		err := c.WriteJSON(map[string]any{"op": opHeartbeatAck})
		f.gwMu.Unlock()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.beat = max(f.beat, n)
		f.notifyLocked()
		f.mu.Unlock()
	}
}

// handshake answers the client's first message and makes c the current connection. A new
// session starts its sequence afresh; a resumed one gets the events after the sequence
// number the client names, then RESUMED.
func (f *Server) handshake(c *websocket.Conn, op int, d json.RawMessage) (string, error) {
	f.gwMu.Lock()
	defer f.gwMu.Unlock()
	switch op {
	case opIdentify:
		f.sessions++
		f.session = fmt.Sprintf("fake-session-%d", f.sessions)
		f.events = nil
		f.seq = 1
		err := c.WriteJSON(map[string]any{"op": opDispatch, "t": "READY", "s": f.seq, "d": map[string]any{
			"v": 10, "session_id": f.session, "resume_gateway_url": f.gatewayURL(),
			"user":   map[string]any{"id": BotID, "username": "loopbot", "bot": true},
			"guilds": []any{}, "application": map[string]any{"id": AppID, "flags": 0},
		}})
		if err != nil {
			return "", fmt.Errorf("send READY: %w", err)
		}
		f.conn = c
		return "identify", nil
	case opResume:
		var p struct {
			SessionID string `json:"session_id"`
			Seq       int64  `json:"seq"`
		}
		if err := json.Unmarshal(d, &p); err != nil {
			return "", fmt.Errorf("resume: %w", err)
		}
		if f.session == "" || p.SessionID != f.session {
			// Discord's answer to a session it does not know: not resumable.
			_ = c.WriteJSON(map[string]any{"op": opInvalidSession, "d": false})
			return "", fmt.Errorf("resume of session %q, want %q", p.SessionID, f.session)
		}
		for _, e := range f.events {
			if e.seq <= p.Seq {
				continue
			}
			if err := c.WriteJSON(map[string]any{"op": opDispatch, "t": e.typ, "s": e.seq, "d": e.d}); err != nil {
				return "", fmt.Errorf("replay: %w", err)
			}
		}
		f.seq++
		if err := c.WriteJSON(map[string]any{"op": opDispatch, "t": "RESUMED", "s": f.seq, "d": map[string]any{}}); err != nil {
			return "", fmt.Errorf("send RESUMED: %w", err)
		}
		f.conn = c
		return "resume", nil
	}
	return "", fmt.Errorf("first op %d, want %d (identify) or %d (resume)", op, opIdentify, opResume)
}

// WaitHandshake waits for the next gateway connection's Identify or Resume (each is
// returned once, in order) and returns "identify" or "resume".
func (f *Server) WaitHandshake(ctx context.Context) (string, error) {
	var kind string
	err := f.WaitUntil(ctx, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.taken < len(f.handshakes) {
			kind = f.handshakes[f.taken]
			f.taken++
			return true
		}
		return false
	})
	if err != nil {
		return "", fmt.Errorf("no gateway handshake: %w", err)
	}
	return kind, nil
}

// WaitHeartbeat waits until the fake has acked a heartbeat on the latest gateway connection:
// the client's connection is fully up. (Dropping a connection before discordgo's heartbeat
// loop started makes discordgo reconnect twice at once.)
func (f *Server) WaitHeartbeat(ctx context.Context) error {
	err := f.WaitUntil(ctx, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.handshakes) > 0 && f.beat == len(f.handshakes)
	})
	if err != nil {
		return fmt.Errorf("no heartbeat on the gateway: %w", err)
	}
	return nil
}

// Connected reports whether a client is connected to the gateway.
func (f *Server) Connected() bool {
	f.gwMu.Lock()
	defer f.gwMu.Unlock()
	return f.conn != nil
}

// Dispatch sends a gateway event (such as INTERACTION_CREATE or MESSAGE_CREATE with d as its
// data) on the current connection. While the client is away the event is held, and its
// Resume gets it.
func (f *Server) Dispatch(typ string, d any) error {
	raw, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("dispatch %s: %w", typ, err)
	}
	f.gwMu.Lock()
	defer f.gwMu.Unlock()
	if f.closed {
		return fmt.Errorf("dispatch %s: the fake is closed", typ)
	}
	f.seq++
	f.events = append(f.events, event{seq: f.seq, typ: typ, d: raw})
	if len(f.events) > maxEvents {
		f.events = f.events[len(f.events)-maxEvents:]
	}
	if f.conn != nil {
		if err := f.conn.WriteJSON(map[string]any{"op": opDispatch, "t": typ, "s": f.seq, "d": json.RawMessage(raw)}); err != nil {
			// The connection is broken; the client's Resume gets the event.
			f.conn.UnderlyingConn().Close()
			f.conn = nil
		}
	}
	return nil
}

// DropGateway cuts the current gateway connection without a close frame, as a network
// failure would; discordgo then reconnects and resumes.
func (f *Server) DropGateway() error {
	f.gwMu.Lock()
	defer f.gwMu.Unlock()
	if f.conn == nil {
		return errors.New("drop gateway: no client is connected")
	}
	f.conn.UnderlyingConn().Close()
	f.conn = nil
	return nil
}

// Connections returns how many gateway connections are open, whichever client holds them.
func (f *Server) Connections() int {
	f.gwMu.Lock()
	defer f.gwMu.Unlock()
	return len(f.conns)
}
