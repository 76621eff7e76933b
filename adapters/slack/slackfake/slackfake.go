package slackfake

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/gorilla/websocket"
)

// The identities the fake reports: auth.test answers with the bot's, and the payload
// builders use them.
const (
	TeamID    = "T1"
	AppID     = "A1"
	BotUserID = "UBOT"
	BotID     = "BBOT"
	// UserID is the person who mentions the bot in MentionCallback and MessageCallback.
	UserID = "U1"
)

var (
	// ErrNotConnected is returned for a frame that can only go to the current Socket Mode
	// connection when there is none.
	ErrNotConnected = errors.New("slackfake: no socket mode connection")
	// ErrClosed is returned once Close has been called.
	ErrClosed = errors.New("slackfake: server closed")
)

// Call is one Web API call the fake received.
type Call struct {
	// Method is the Web API method ("chat.postMessage"), or "response_url" for a post to
	// the URL ResponseURL returns.
	Method string
	// Values are the form values of the call; for response_url, "body" holds the raw body.
	Values url.Values
	// At is when the request arrived.
	At time.Time
	// Status is the HTTP status the fake answered with.
	Status int
	// Injected is set when the answer was a failure queued with FailNext.
	Injected bool
	// TS is the timestamp the fake gave the message a chat.postMessage,
	// chat.postEphemeral or chat.startStream call posted; empty for other calls and refused ones.
	TS string
}

// Ack is one Socket Mode acknowledgement the fake read.
type Ack struct {
	EnvelopeID string
	// Payload is the ack's payload, if any (a slash command's immediate answer).
	Payload json.RawMessage
	// Connection is the connection it arrived on, counted from 1.
	Connection int
	// WrittenAt is when the latest delivery of the envelope was written to a socket, just
	// before its acknowledgement; zero for an envelope the fake never sent.
	WrittenAt time.Time
	// AckedAt is when the acknowledgement was read.
	AckedAt time.Time
	// Deliveries is how many times the envelope had been written when it was acknowledged.
	Deliveries int
}

// Latency is the time from the envelope's latest delivery to its acknowledgement.
func (a Ack) Latency() time.Duration {
	if a.WrittenAt.IsZero() {
		return 0
	}
	return a.AckedAt.Sub(a.WrittenAt)
}

// Failure is an answer FailNext gives instead of the method's normal one.
type Failure struct {
	// Status is the HTTP status; 200 when zero.
	Status int
	Header http.Header
	Body   string
}

// RateLimited is Slack's 429 with a Retry-After header, in whole seconds rounded up.
func RateLimited(retryAfter time.Duration) Failure {
	secs := int(math.Ceil(retryAfter.Seconds()))
	return Failure{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {strconv.Itoa(secs)}}}
}

// ServerError is an HTTP 500 with no Slack body, as a failing front end answers.
func ServerError() Failure {
	return Failure{Status: http.StatusInternalServerError, Body: "internal server error"}
}

// APIError is a 200 whose body is {"ok":false,"error":code}: how the Web API refuses a call
// (channel_not_found, invalid_blocks, ...).
func APIError(code string) Failure {
	b, _ := json.Marshal(map[string]any{"ok": false, "error": code})
	return Failure{Body: string(b)}
}

// Server is the fake Slack: the Web API under APIURL and Socket Mode behind
// apps.connections.open. Its methods are safe for concurrent use.
type Server struct {
	http    *http.Server
	url     string
	sockets sync.WaitGroup

	mu sync.Mutex
	// changed is closed whenever a record changes, and made again by the next Wait: a
	// change nobody waits for costs nothing.
	changed   chan struct{}
	ackWaits  []ackWait // WaitAcks's waiters
	closed    bool
	calls     []Call
	acks      []Ack
	fail      map[string][]Failure
	envs      map[string]*envelope
	order     []string // envelope IDs in the order they were first sent
	cur       *conn
	live      map[*conn]bool
	conns     int
	pings     int // pings written, on every connection
	lastTS    int
	dropOnAck map[string]bool
	replies   map[string]string // conversations.replies bodies by channel + "/" + ts
	views     int               // views opened, for their IDs
	users     map[string]string // users.info bodies by user ID
	// streams are the streamed messages, refuseStreams the error startStream answers if
	// set (stream.go).
	streams       []*StreamedMessage
	refuseStreams string
}

// envelope is a Socket Mode envelope the fake keeps until it is acknowledged.
type envelope struct {
	typ        string
	payload    json.RawMessage
	raw        []byte // set for SendRaw: the frame, written as it is every time
	deliveries int
	writtenAt  time.Time
	acked      bool
}

// conn is one Socket Mode connection; writes are serialised as gorilla requires.
type conn struct {
	n   int
	ws  *websocket.Conn
	wmu sync.Mutex
	// buf holds each envelope's frame on its way out; it is wmu's.
	buf  []byte
	done chan struct{}
}

// New starts a fake Slack on a loopback port. Close stops it.
func New() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("slackfake: listen: %w", err)
	}
	s := &Server{
		url:       "http://" + ln.Addr().String(),
		fail:      map[string][]Failure{},
		envs:      map[string]*envelope{},
		live:      map[*conn]bool{},
		dropOnAck: map[string]bool{},
		replies:   map[string]string{},
		users:     map[string]string{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.serveAPI)
	mux.HandleFunc("/link/", s.serveSocket)
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.http.Serve(ln) }()
	return s, nil
}

// Close closes the Socket Mode connections and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.cur = nil
	var live []*conn
	for c := range s.live {
		live = append(live, c)
	}
	s.notifyLocked()
	s.mu.Unlock()
	for _, c := range live {
		c.ws.Close()
	}
	_ = s.http.Close()
	s.sockets.Wait()
}

// APIURL is the Web API base URL, ending in a slash: slack-go's OptionAPIURL and loopbot's
// [slack] api_url.
func (s *Server) APIURL() string { return s.url + "/api/" }

// ResponseURL is a slash command's response_url; posts to it are recorded as calls of
// method "response_url".
func (s *Server) ResponseURL() string { return s.APIURL() + "response_url" }

// notifyLocked wakes every Wait; s.mu must be held.
func (s *Server) notifyLocked() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// Wait blocks until cond holds or ctx ends. cond is evaluated now and again after every
// change the fake records (a call, an ack, a connection), so it may use the snapshot
// methods (Calls, Acks, Connections).
func (s *Server) Wait(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("slackfake: wait: %w", ctx.Err())
		}
	}
}

// Calls returns the Web API calls received so far, in order of arrival.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// CallsOf returns the calls of method received so far, in order.
func (s *Server) CallsOf(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// FailNext makes the next n calls of method answer with f instead of their normal answer.
// Failures queued for a method are used in the order queued.
func (s *Server) FailNext(method string, n int, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.fail[method] = append(s.fail[method], f)
	}
}

// Acks returns the acknowledgements read so far, in order. An envelope delivered twice
// and acknowledged twice appears twice.
func (s *Server) Acks() []Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.acks)
}

// AckCount is len(Acks()) without the copy: for a wait on a burst's acks, whose condition
// runs at every ack.
func (s *Server) AckCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.acks)
}

// ackWait is a WaitAcks waiting for n acknowledgements.
type ackWait struct {
	n    int
	done chan struct{}
}

// WaitAcks waits until n acknowledgements have been read, without waking at each one as
// Wait would: for a burst's acks, whose wait runs on the cores of the client it times.
func (s *Server) WaitAcks(ctx context.Context, n int) error {
	s.mu.Lock()
	if len(s.acks) >= n {
		s.mu.Unlock()
		return nil
	}
	w := ackWait{n: n, done: make(chan struct{})}
	s.ackWaits = append(s.ackWaits, w)
	s.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		s.ackWaits = slices.DeleteFunc(s.ackWaits, func(o ackWait) bool { return o.done == w.done })
		s.mu.Unlock()
		return fmt.Errorf("slackfake: wait for %d acks: %w", n, ctx.Err())
	}
}

// ackedLocked ends the WaitAcks that the acks read so far satisfy; s.mu must be held.
func (s *Server) ackedLocked() {
	s.ackWaits = slices.DeleteFunc(s.ackWaits, func(w ackWait) bool {
		if len(s.acks) < w.n {
			return false
		}
		close(w.done)
		return true
	})
}

// WaitAck waits for the first acknowledgement of envelopeID and returns it.
func (s *Server) WaitAck(ctx context.Context, envelopeID string) (Ack, error) {
	var found Ack
	err := s.Wait(ctx, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		i := slices.IndexFunc(s.acks, func(a Ack) bool { return a.EnvelopeID == envelopeID })
		if i >= 0 {
			found = s.acks[i]
		}
		return i >= 0
	})
	if err != nil {
		return Ack{}, fmt.Errorf("ack of %s: %w", envelopeID, err)
	}
	return found, nil
}

// Unacked returns the IDs of the envelopes sent and not acknowledged, in the order sent.
func (s *Server) Unacked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, id := range s.order {
		if !s.envs[id].acked {
			out = append(out, id)
		}
	}
	return out
}

// Connections is how many Socket Mode connections the fake has accepted so far.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Pings is how many pings the fake has written, on all its connections (one a second on
// each).
func (s *Server) Pings() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pings
}

// Connected reports whether a Socket Mode connection is open.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil
}

// WaitConnections waits until the fake has accepted n connections in all (and said hello
// on the last).
func (s *Server) WaitConnections(ctx context.Context, n int) error {
	if err := s.Wait(ctx, func() bool { return s.Connections() >= n }); err != nil {
		return fmt.Errorf("socket mode connection %d: %w", n, err)
	}
	return nil
}

// Send delivers a Socket Mode envelope of envelopeType ("events_api", "interactive",
// "slash_commands") with payload (marshalled to JSON) on the current connection, and keeps
// it until it is acknowledged: an envelope not acknowledged when its connection ends is
// delivered again on the next one. With no connection open it waits for the next one. It
// returns an error only for a payload that does not marshal or a closed server.
//
// A json.RawMessage payload is checked and kept as it is, not marshalled (which would copy
// and compact it): the fake runs in the process of the client whose acks it times. The
// caller must not change it afterwards.
func (s *Server) Send(envelopeType, envelopeID string, payload any) error {
	p, ok := payload.(json.RawMessage)
	if !ok || !jsontext.Value(p).IsValid() {
		var err error
		if p, err = json.Marshal(payload); err != nil {
			return fmt.Errorf("slackfake: envelope %s payload: %w", envelopeID, err)
		}
	}
	return s.send(envelopeID, &envelope{typ: envelopeType, payload: p})
}

// SendRaw writes frame as it is. With an envelopeID it is kept and delivered again like an
// envelope of Send (its retry_attempt is not updated); with none (a disconnect message, say)
// it is written once on the current connection, and ErrNotConnected is returned when there
// is none.
func (s *Server) SendRaw(envelopeID string, frame []byte) error {
	if envelopeID == "" {
		s.mu.Lock()
		c, closed := s.cur, s.closed
		s.mu.Unlock()
		switch {
		case closed:
			return ErrClosed
		case c == nil:
			return ErrNotConnected
		}
		return c.write(frame)
	}
	return s.send(envelopeID, &envelope{raw: slices.Clone(frame)})
}

// SendDisconnect sends Slack's disconnect message with reason ("refresh_requested",
// "warning", "link_disabled") on the current connection.
func (s *Server) SendDisconnect(reason string) error {
	b, _ := json.Marshal(map[string]any{"type": "disconnect", "reason": reason, "debug_info": map[string]any{"host": "applink-fake"}})
	return s.SendRaw("", b)
}

// DropConnection closes the current connection abruptly, with no close frame, as a network
// failure would. Envelopes not acknowledged on it are delivered on the next connection.
func (s *Server) DropConnection() error {
	s.mu.Lock()
	c := s.cur
	s.cur = nil
	if c != nil {
		s.notifyLocked()
	}
	s.mu.Unlock()
	if c == nil {
		return ErrNotConnected
	}
	return c.ws.Close()
}

// DropConnectionOnAck arranges that when the acknowledgement of envelopeID is next read,
// the connection it came on is closed abruptly and the acknowledgement is not counted, as
// if the socket had died with the ack in flight: the client has the envelope, and Slack
// delivers it again on the next connection.
func (s *Server) DropConnectionOnAck(envelopeID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropOnAck[envelopeID] = true
}

func (s *Server) send(id string, e *envelope) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if _, ok := s.envs[id]; !ok {
		s.order = append(s.order, id)
	}
	s.envs[id] = e
	c := s.cur
	var attempt int
	if c != nil {
		attempt = s.deliveredLocked(e)
	}
	s.mu.Unlock()
	if c != nil {
		// A failed write leaves the envelope unacknowledged: it goes again on the next
		// connection.
		_ = s.writeEnvelope(c, id, e, attempt)
	}
	return nil
}

// deliveredLocked counts a delivery of e and returns its attempt, 0 for the first; s.mu
// must be held.
func (s *Server) deliveredLocked(e *envelope) int {
	e.deliveries++
	return e.deliveries - 1
}

// writeEnvelope writes delivery attempt of e on c, stamped as written just before it goes.
// The frame is built in the connection's buffer rather than one of its own.
func (s *Server) writeEnvelope(c *conn, id string, e *envelope, attempt int) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	frame := e.raw
	if frame == nil {
		c.buf = appendFrame(c.buf[:0], id, e, attempt)
		frame = c.buf
	}
	s.stamp(e)
	return c.writeLocked(frame)
}

// appendFrame appends the frame of delivery attempt of e (not a SendRaw one) to b.
func appendFrame(b []byte, id string, e *envelope, attempt int) []byte {
	reason := ""
	if attempt > 0 {
		reason = "timeout"
	}
	// Written field by field rather than marshalled from a map, which would scan the
	// payload again: the fake runs in the process of the client whose acks it times, and
	// the time it takes to send a burst is taken from that client.
	b = append(b, `{"accepts_response_payload":`...)
	b = strconv.AppendBool(b, e.typ != "events_api")
	b = append(b, `,"envelope_id":`...)
	b = appendJSONString(b, id)
	b = append(b, `,"payload":`...)
	b = append(b, e.payload...)
	b = append(b, `,"retry_attempt":`...)
	b = strconv.AppendInt(b, int64(attempt), 10)
	b = append(b, `,"retry_reason":`...)
	b = appendJSONString(b, reason)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.typ)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// stamp records that a delivery of e is being written now.
func (s *Server) stamp(e *envelope) {
	s.mu.Lock()
	e.writtenAt = time.Now()
	s.mu.Unlock()
}

// write sends one frame.
func (c *conn) write(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(frame)
}

// writeLocked is write with c.wmu held.
func (c *conn) writeLocked(frame []byte) error {
	_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := c.ws.WriteMessage(websocket.TextMessage, frame); err != nil {
		return fmt.Errorf("slackfake: write to connection %d: %w", c.n, err)
	}
	return nil
}

// upgrader accepts the Origin slack-go sends (https://api.slack.com), as Slack does.
var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.sockets.Add(1)
	}
	s.mu.Unlock()
	if closed {
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	defer s.sockets.Done()
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &conn{ws: ws, done: make(chan struct{})}
	defer ws.Close()
	defer close(c.done)
	if c.write([]byte(`{"type":"hello","num_connections":1,"debug_info":{"host":"applink-fake"},"connection_info":{"app_id":"`+AppID+`"}}`)) != nil {
		return
	}

	// The connection becomes current and takes every unacknowledged envelope, in one step,
	// so that an envelope sent meanwhile goes either here or in the redelivery, never both.
	type delivery struct {
		id      string
		e       *envelope
		attempt int
	}
	var redeliver []delivery
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.conns++
	c.n = s.conns
	s.cur = c
	s.live[c] = true
	for _, id := range s.order {
		if e := s.envs[id]; !e.acked {
			redeliver = append(redeliver, delivery{id, e, s.deliveredLocked(e)})
		}
	}
	s.notifyLocked()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.cur == c {
			s.cur = nil
		}
		delete(s.live, c)
		s.notifyLocked()
		s.mu.Unlock()
	}()
	for _, d := range redeliver {
		if s.writeEnvelope(c, d.id, d.e, d.attempt) != nil {
			break
		}
	}

	// Slack pings; slack-go reconnects when it hears none for 30 seconds.
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-c.done:
				return
			case <-tick.C:
				if ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second)) == nil {
					s.mu.Lock()
					s.pings++
					s.notifyLocked()
					s.mu.Unlock()
				}
			}
		}
	}()
	// The acks are read into one buffer: this runs on the cores of the client it times.
	var buf bytes.Buffer
	for {
		_, r, err := ws.NextReader()
		if err != nil {
			return
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			return
		}
		at := time.Now()
		b := buf.Bytes()
		var a struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		// jsonv1 is encoding/json's rules on encoding/json/v2's implementation: half the
		// time, one allocation instead of six.
		if jsonv1.Unmarshal(b, &a) != nil || a.EnvelopeID == "" {
			continue
		}
		s.mu.Lock()
		if s.dropOnAck[a.EnvelopeID] {
			delete(s.dropOnAck, a.EnvelopeID)
			if s.cur == c {
				s.cur = nil
			}
			s.notifyLocked()
			s.mu.Unlock()
			return
		}
		ack := Ack{EnvelopeID: a.EnvelopeID, Payload: a.Payload, Connection: c.n, AckedAt: at}
		if e := s.envs[a.EnvelopeID]; e != nil {
			e.acked = true
			ack.WrittenAt, ack.Deliveries = e.writtenAt, e.deliveries
		}
		s.acks = append(s.acks, ack)
		s.ackedLocked()
		s.notifyLocked()
		s.mu.Unlock()
	}
}

// serveAPI answers a Web API call and records it.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	call := Call{Method: strings.TrimPrefix(r.URL.Path, "/api/"), At: time.Now(), Status: http.StatusOK}
	if call.Method == "response_url" || strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		// A response_url, and Web API methods called with a JSON body (views.open), keep
		// the body as it came.
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		call.Values = url.Values{"body": {string(body)}}
	} else {
		_ = r.ParseForm()
		call.Values = r.PostForm
	}

	s.mu.Lock()
	var answer Failure
	if q := s.fail[call.Method]; len(q) > 0 {
		answer, call.Injected = q[0], true
		s.fail[call.Method] = q[1:]
		if answer.Status != 0 {
			call.Status = answer.Status
		}
	} else {
		answer.Body, call.TS = s.answerLocked(call.Method, call.Values, r.Host)
	}
	s.calls = append(s.calls, call)
	s.notifyLocked()
	s.mu.Unlock()

	for k, vs := range answer.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if w.Header().Get("Content-Type") == "" {
		ct := "application/json; charset=utf-8"
		if call.Status != http.StatusOK {
			ct = "text/plain; charset=utf-8"
		}
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(call.Status)
	_, _ = io.WriteString(w, answer.Body)
}

// answerLocked is the normal answer to a call of method, with the timestamp of the message
// it posted if it posted one; s.mu must be held.
func (s *Server) answerLocked(method string, v url.Values, host string) (body, ts string) {
	var out map[string]any
	switch method {
	case "auth.test":
		out = map[string]any{"url": "https://fake.slack.com/", "team": "Fake", "user": "loopbot",
			"team_id": TeamID, "user_id": BotUserID, "bot_id": BotID}
	case "apps.connections.open":
		out = map[string]any{"url": fmt.Sprintf("ws://%s/link/?ticket=%d", host, s.conns+1)}
	case "chat.postMessage":
		ts = s.tsLocked()
		out = map[string]any{"channel": v.Get("channel"), "ts": ts}
	case "chat.update":
		out = map[string]any{"channel": v.Get("channel"), "ts": v.Get("ts"), "text": v.Get("text")}
	case "chat.postEphemeral":
		ts = s.tsLocked()
		out = map[string]any{"message_ts": ts}
	case "response_url":
		out = map[string]any{}
	case "views.open":
		s.views++
		out = map[string]any{"view": map[string]any{"id": fmt.Sprintf("V%07d", s.views), "type": "modal"}}
	case "conversations.replies":
		if body, ok := s.replies[v.Get("channel")+"/"+v.Get("ts")]; ok {
			return body, ""
		}
		out = map[string]any{"messages": []any{}, "has_more": false}
	case "assistant.threads.setStatus", "assistant.threads.setSuggestedPrompts":
		// Slack wants the thread; prompts come as JSON.
		if v.Get("channel_id") == "" || v.Get("thread_ts") == "" {
			return `{"ok":false,"error":"invalid_arguments"}`, ""
		}
		if method == "assistant.threads.setSuggestedPrompts" && !json.Valid([]byte(v.Get("prompts"))) {
			return `{"ok":false,"error":"invalid_arguments"}`, ""
		}
		out = map[string]any{}
	case "users.info":
		if body, ok := s.users[v.Get("user")]; ok {
			return body, ""
		}
		return `{"ok":false,"error":"user_not_found"}`, ""
	case "chat.startStream", "chat.appendStream", "chat.stopStream", "chat.delete":
		return s.streamLocked(method, v)
	default:
		return `{"ok":false,"error":"unknown_method"}`, ""
	}
	out["ok"] = true
	b, _ := json.Marshal(out)
	return string(b), ts
}

// SetReplies makes conversations.replies of the thread ts in channel answer body, a whole
// response as Slack sends it (a captured one, say). Unset threads answer no messages.
func (s *Server) SetReplies(channel, ts, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies[channel+"/"+ts] = body
}

// SetUser makes users.info of id answer a user with these names; other users answer
// user_not_found.
func (s *Server) SetUser(id, displayName, realName string) {
	b, _ := json.Marshal(map[string]any{"ok": true, "user": map[string]any{
		"id": id, "team_id": TeamID, "name": strings.ToLower(strings.ReplaceAll(realName, " ", ".")), "real_name": realName,
		"profile": map[string]any{"display_name": displayName, "real_name": realName}}})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[id] = string(b)
}

// tsLocked returns a new message timestamp, later than every earlier one.
func (s *Server) tsLocked() string {
	s.lastTS++
	return fmt.Sprintf("1700000100.%06d", s.lastTS)
}

// Payload builders, in the shapes Slack sends.

// MentionCallback is the Events API payload of an app_mention by UserID in channel, at ts,
// in the thread threadTS (empty: at the root of the channel).
func MentionCallback(eventID, channel, ts, threadTS, text string) map[string]any {
	return callback(eventID, channel, ts, threadTS, map[string]any{"type": "app_mention", "text": text})
}

// MessageCallback is the Events API payload of a channel message by UserID, at ts, in the
// thread threadTS: a reply when threadTS is set.
func MessageCallback(eventID, channel, ts, threadTS, text string) map[string]any {
	return callback(eventID, channel, ts, threadTS, map[string]any{"type": "message", "channel_type": "channel", "text": text})
}

func callback(eventID, channel, ts, threadTS string, ev map[string]any) map[string]any {
	ev["user"], ev["ts"], ev["channel"], ev["event_ts"] = UserID, ts, channel, ts
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	return map[string]any{"token": "x", "team_id": TeamID, "api_app_id": AppID, "type": "event_callback",
		"event_id": eventID, "event_time": 1700000000, "event": ev}
}

// Click describes a button click for ClickPayload.
type Click struct {
	TriggerID, UserID, UserName  string
	Channel, ThreadTS, MessageTS string
	// Value is the button's value: what the app put in it.
	Value string
	// ActionTS is when the click happened, as Slack writes it.
	ActionTS string
	// ActionID and Label are the button's action_id and text; empty takes
	// loopbot_button_0 and Approve.
	ActionID, Label string
}

// ClickPayload is the block_actions interactivity payload of a click on a button of the
// message at c.MessageTS, in the thread c.ThreadTS.
func ClickPayload(c Click) map[string]any {
	return map[string]any{
		"type": "block_actions", "trigger_id": c.TriggerID, "api_app_id": AppID,
		"team":      map[string]any{"id": TeamID},
		"user":      map[string]any{"id": c.UserID, "username": c.UserName, "name": c.UserName, "team_id": TeamID},
		"channel":   map[string]any{"id": c.Channel, "name": "general"},
		"container": map[string]any{"type": "message", "message_ts": c.MessageTS, "channel_id": c.Channel, "is_ephemeral": false, "thread_ts": c.ThreadTS},
		"message":   map[string]any{"type": "message", "ts": c.MessageTS, "thread_ts": c.ThreadTS, "user": BotUserID},
		"actions": []map[string]any{{"type": "button", "action_id": firstOf(c.ActionID, "loopbot_button_0"), "block_id": "loopbot_actions",
			"value": c.Value, "text": map[string]any{"type": "plain_text", "text": firstOf(c.Label, "Approve")}, "action_ts": c.ActionTS}},
	}
}

func firstOf(s, or string) string {
	if s != "" {
		return s
	}
	return or
}

// Submission is a person submitting a modal the app opened with views.open.
type Submission struct {
	ViewID, UserID, UserName string
	// CallbackID and PrivateMetadata are the view's, as views.open set them.
	CallbackID, PrivateMetadata string
	// Values are the view's input values: block_id -> action_id -> the typed text.
	Values map[string]map[string]string
}

// SubmissionPayload is the view_submission interactivity payload of a modal's submission, in
// the shape of slack-go's own test payload (interactions_test.go, viewSubmissionCallback).
func SubmissionPayload(s Submission) map[string]any {
	values := map[string]any{}
	for block, inputs := range s.Values {
		m := map[string]any{}
		for action, v := range inputs {
			m[action] = map[string]any{"type": "plain_text_input", "value": v}
		}
		values[block] = m
	}
	return map[string]any{
		"type": "view_submission", "api_app_id": AppID, "trigger_id": "13345224609.738474920.8088930838d88f008e0",
		"team": map[string]any{"id": TeamID, "domain": "fake"},
		"user": map[string]any{"id": s.UserID, "username": s.UserName, "name": s.UserName, "team_id": TeamID},
		"view": map[string]any{"id": s.ViewID, "team_id": TeamID, "type": "modal", "callback_id": s.CallbackID,
			"private_metadata": s.PrivateMetadata, "state": map[string]any{"values": values}, "hash": "156663117.cd33ad1f",
			"app_installed_team_id": TeamID},
		"response_urls": []any{},
	}
}

// Sign returns the headers Slack signs an HTTP request with (the v0 signature: HMAC-SHA256
// of "v0:<timestamp>:<body>" with the signing secret) for body sent at at.
func Sign(secret string, body []byte, at time.Time) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + ts + ":"))
	mac.Write(body)
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return h
}
