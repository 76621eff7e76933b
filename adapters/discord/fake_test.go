package discord

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Test identities of the fake Discord.
const (
	fakeAppID   = "900000000000000001"
	fakeBotID   = "900000000000000001"
	fakeGuildID = "900000000000000002"
	fakeChannel = "900000000000000003"
	fakeUserID  = "900000000000000004"
)

// FakeDiscord is Discord at the protocol level for discordgo: REST routes on an httptest
// server and a gateway websocket. It logs every request and models interaction tokens
// expiring after fifteen minutes on its own clock.
type FakeDiscord struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	now      time.Time
	nextID   int64
	requests []FakeRequest
	messages map[string]*FakeMessage
	channels map[string]map[string]any
	tokens   map[string]time.Time
	failures []fakeFailure
	changed  chan struct{} // closed and replaced at every request
	// Order logs interaction callbacks and what tests add (such as "handle"), in order.
	order []string

	// gateway
	conn       *websocket.Conn
	connMu     sync.Mutex // serialises writes to conn
	seq        int64
	handshakes chan string // "identify" or "resume", one per connection
	heartbeats chan struct{}
}

// FakeRequest is one request the fake received.
type FakeRequest struct {
	Method, Path, Auth string
	Body               map[string]any // a JSON object body
	List               []any          // a JSON array body
	Files              map[string]string
	// At is when the fake received the request, on the real clock: a test checks with it
	// that a wait the fake asked for was kept.
	At time.Time
}

// FakeMessage is a message as the fake holds it.
type FakeMessage struct {
	ID, ChannelID string
	Payload       map[string]any
	Edits         int
}

type fakeFailure struct {
	method, pathSuffix string
	status             int
	body               string
	header             http.Header
}

// NewFakeDiscord starts a fake Discord; it stops with the test.
func NewFakeDiscord(t testing.TB) *FakeDiscord {
	f := &FakeDiscord{
		t:          t,
		now:        time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		nextID:     1000000000000000000,
		messages:   map[string]*FakeMessage{},
		channels:   map[string]map[string]any{fakeChannel: {"id": fakeChannel, "type": 0, "guild_id": fakeGuildID}},
		tokens:     map[string]time.Time{},
		handshakes: make(chan string, 16),
		heartbeats: make(chan struct{}, 16),
		changed:    make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v9/gateway", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"url": "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/gw"})
	})
	mux.HandleFunc("GET /gw", f.gateway)
	mux.HandleFunc("GET /gw/", f.gateway)
	mux.HandleFunc("PUT /api/v9/applications/{app}/commands", f.commands)
	mux.HandleFunc("PUT /api/v9/applications/{app}/guilds/{guild}/commands", f.commands)
	mux.HandleFunc("POST /api/v9/interactions/{id}/{token}/callback", func(w http.ResponseWriter, r *http.Request) {
		if !f.tokenAlive(w, r.PathValue("token")) {
			return
		}
		f.mu.Lock()
		f.order = append(f.order, "callback")
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("PATCH /api/v9/webhooks/{app}/{token}/messages/{msg}", func(w http.ResponseWriter, r *http.Request) {
		if !f.tokenAlive(w, r.PathValue("token")) {
			return
		}
		// @original of a token is one message of the interaction's channel.
		id := r.PathValue("msg")
		if id == "@original" {
			id = "orig-" + r.PathValue("token")
		}
		writeJSON(w, 200, f.putMessage(id, fakeChannel, f.lastBody()))
	})
	mux.HandleFunc("POST /api/v9/webhooks/{app}/{token}", func(w http.ResponseWriter, r *http.Request) {
		if !f.tokenAlive(w, r.PathValue("token")) {
			return
		}
		writeJSON(w, 200, f.putMessage(f.newID(), fakeChannel, f.lastBody()))
	})
	mux.HandleFunc("POST /api/v9/channels/{ch}/messages", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, f.putMessage(f.newID(), r.PathValue("ch"), f.lastBody()))
	})
	mux.HandleFunc("PATCH /api/v9/channels/{ch}/messages/{msg}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		m, ok := f.messages[r.PathValue("msg")]
		f.mu.Unlock()
		if !ok || m.ChannelID != r.PathValue("ch") {
			writeJSON(w, 404, map[string]any{"code": 10008, "message": "Unknown Message"})
			return
		}
		writeJSON(w, 200, f.putMessage(m.ID, m.ChannelID, f.lastBody()))
	})
	mux.HandleFunc("POST /api/v9/channels/{ch}/messages/{msg}/threads", func(w http.ResponseWriter, r *http.Request) {
		id, parent := r.PathValue("msg"), r.PathValue("ch")
		f.mu.Lock()
		_, exists := f.channels[id]
		ch := map[string]any{"id": id, "type": 11, "parent_id": parent, "owner_id": fakeBotID, "guild_id": fakeGuildID, "name": f.requests[len(f.requests)-1].Body["name"]}
		if !exists {
			f.channels[id] = ch
		}
		f.mu.Unlock()
		if exists {
			writeJSON(w, 400, map[string]any{"code": 160004, "message": "A thread has already been created for this message"})
			return
		}
		writeJSON(w, 201, ch)
	})
	mux.HandleFunc("GET /api/v9/channels/{ch}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		ch, ok := f.channels[r.PathValue("ch")]
		f.mu.Unlock()
		if !ok {
			writeJSON(w, 404, map[string]any{"code": 10003, "message": "Unknown Channel"})
			return
		}
		writeJSON(w, 200, ch)
	})
	f.srv = httptest.NewServer(f.record(mux))
	t.Cleanup(func() {
		f.connMu.Lock()
		if f.conn != nil {
			f.conn.Close()
		}
		f.connMu.Unlock()
		f.srv.Close()
	})
	return f
}

// URL is the base to put in Config.APIURL.
func (f *FakeDiscord) URL() string { return f.srv.URL + "/" }

// Advance moves the fake's clock, which decides whether interaction tokens are alive.
func (f *FakeDiscord) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// Now is the fake's clock.
func (f *FakeDiscord) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Fail makes the next request whose method matches and whose path ends in suffix fail with
// status, body and header.
func (f *FakeDiscord) Fail(method, suffix string, status int, body string, header http.Header) {
	f.mu.Lock()
	f.failures = append(f.failures, fakeFailure{method, suffix, status, body, header})
	f.mu.Unlock()
}

// Mark appends to the order log.
func (f *FakeDiscord) Mark(s string) {
	f.mu.Lock()
	f.order = append(f.order, s)
	f.mu.Unlock()
}

// Order is the order log.
func (f *FakeDiscord) Order() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.order...)
}

// Requests returns the requests received so far.
func (f *FakeDiscord) Requests() []FakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FakeRequest(nil), f.requests...)
}

// WaitFor waits until pred holds for the requests received so far and returns them.
func (f *FakeDiscord) WaitFor(t testing.TB, what string, pred func([]FakeRequest) bool) []FakeRequest {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		reqs := append([]FakeRequest(nil), f.requests...)
		changed := f.changed
		f.mu.Unlock()
		if pred(reqs) {
			return reqs
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("fake discord: no %s; requests:\n%s", what, describe(reqs))
		}
	}
}

// Find returns the requests with the method whose path matches the pattern, where "*"
// stands for one path segment.
func Find(reqs []FakeRequest, method, pattern string) []FakeRequest {
	var out []FakeRequest
	for _, r := range reqs {
		if r.Method == method && pathMatch(pattern, r.Path) {
			out = append(out, r)
		}
	}
	return out
}

func pathMatch(pattern, path string) bool {
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(xs) {
		return false
	}
	for i := range ps {
		if ps[i] != "*" && ps[i] != xs[i] {
			return false
		}
	}
	return true
}

func describe(reqs []FakeRequest) string {
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "  %s %s\n", r.Method, r.Path)
	}
	return b.String()
}

// Message returns a message by ID.
func (f *FakeDiscord) Message(id string) (FakeMessage, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.messages[id]
	if !ok {
		return FakeMessage{}, false
	}
	return *m, true
}

// ChannelMessages returns the messages of a channel, oldest first.
func (f *FakeDiscord) ChannelMessages(ch string) []FakeMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []FakeMessage
	for _, m := range f.messages {
		if m.ChannelID == ch {
			out = append(out, *m)
		}
	}
	// IDs are increasing numbers of the same length.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].ID < out[j-1].ID; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// AddChannel makes a channel known to the fake.
func (f *FakeDiscord) AddChannel(ch map[string]any) {
	f.mu.Lock()
	f.channels[ch["id"].(string)] = ch
	f.mu.Unlock()
}

func (f *FakeDiscord) newID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	return fmt.Sprint(f.nextID)
}

func (f *FakeDiscord) lastBody() map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1].Body
}

func (f *FakeDiscord) putMessage(id, ch string, payload map[string]any) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.messages[id]
	if !ok {
		m = &FakeMessage{ID: id, ChannelID: ch}
		f.messages[id] = m
	} else {
		m.Edits++
	}
	m.Payload = payload
	return map[string]any{"id": id, "channel_id": ch, "content": payload["content"], "author": map[string]any{"id": fakeBotID, "username": "loopbot", "bot": true}}
}

// tokenAlive answers 401 for an interaction token older than fifteen minutes, as Discord
// does.
func (f *FakeDiscord) tokenAlive(w http.ResponseWriter, token string) bool {
	f.mu.Lock()
	issued, ok := f.tokens[token]
	alive := ok && f.now.Sub(issued) < 15*time.Minute
	f.mu.Unlock()
	if !alive {
		writeJSON(w, 401, map[string]any{"code": 50027, "message": "Invalid Webhook Token"})
	}
	return alive
}

// record logs every request, decoding JSON and multipart bodies, and serves failures.
func (f *FakeDiscord) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/gw") {
			next.ServeHTTP(w, r)
			return
		}
		req := FakeRequest{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization"), At: time.Now()}
		raw, _ := io.ReadAll(r.Body)
		mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if mt == "multipart/form-data" {
			mr := multipart.NewReader(strings.NewReader(string(raw)), params["boundary"])
			req.Files = map[string]string{}
			for {
				p, err := mr.NextPart()
				if err != nil {
					break
				}
				b, _ := io.ReadAll(p)
				if p.FormName() == "payload_json" {
					raw = b
				} else {
					req.Files[p.FileName()] = string(b)
				}
			}
		}
		if len(raw) > 0 {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				f.t.Errorf("fake discord: %s %s: body is not JSON: %v", r.Method, r.URL.Path, err)
			}
			req.Body, _ = v.(map[string]any)
			req.List, _ = v.([]any)
		}
		f.mu.Lock()
		f.requests = append(f.requests, req)
		close(f.changed)
		f.changed = make(chan struct{})
		var fail *fakeFailure
		for i, fl := range f.failures {
			if fl.method == r.Method && strings.HasSuffix(r.URL.Path, fl.pathSuffix) {
				fail = &fl
				f.failures = append(f.failures[:i], f.failures[i+1:]...)
				break
			}
		}
		f.mu.Unlock()
		if fail != nil {
			for k, vs := range fail.header {
				w.Header()[k] = vs
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(fail.status)
			io.WriteString(w, fail.body)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (f *FakeDiscord) commands(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	cmds := f.requests[len(f.requests)-1].List
	f.mu.Unlock()
	writeJSON(w, 200, cmds)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// gateway serves one websocket connection: Hello, then Identify (READY) or Resume
// (RESUMED), then heartbeat acks until the connection ends.
func (f *FakeDiscord) gateway(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	if err := c.WriteJSON(map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": 45000}}); err != nil {
		return
	}
	var first struct {
		Op int             `json:"op"`
		D  json.RawMessage `json:"d"`
	}
	if err := c.ReadJSON(&first); err != nil {
		return
	}
	f.connMu.Lock()
	f.conn = c
	kind := "identify"
	switch first.Op {
	case 2:
		f.seq++
		err = c.WriteJSON(map[string]any{"op": 0, "t": "READY", "s": f.seq, "d": map[string]any{
			"v": 9, "session_id": "fake-session", "resume_gateway_url": "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/gw",
			"user":   map[string]any{"id": fakeBotID, "username": "loopbot", "bot": true},
			"guilds": []any{}, "application": map[string]any{"id": fakeAppID},
		}})
	case 6:
		kind = "resume"
		f.seq++
		err = c.WriteJSON(map[string]any{"op": 0, "t": "RESUMED", "s": f.seq, "d": map[string]any{}})
	default:
		f.connMu.Unlock()
		f.t.Errorf("fake gateway: first op %d, want 2 or 6", first.Op)
		return
	}
	f.connMu.Unlock()
	if err != nil {
		return
	}
	f.handshakes <- kind
	for {
		var m struct {
			Op int `json:"op"`
		}
		if err := c.ReadJSON(&m); err != nil {
			return
		}
		if m.Op == 1 {
			f.connMu.Lock()
			err := c.WriteJSON(map[string]any{"op": 11})
			f.connMu.Unlock()
			if err != nil {
				return
			}
			select {
			case f.heartbeats <- struct{}{}:
			default:
			}
		}
	}
}

// WaitHandshake waits for the next connection's Identify or Resume and returns which.
func (f *FakeDiscord) WaitHandshake(t testing.TB) string {
	t.Helper()
	select {
	case k := <-f.handshakes:
		return k
	case <-time.After(10 * time.Second):
		t.Fatal("fake gateway: no connection")
		return ""
	}
}

// WaitHeartbeat waits for a heartbeat the fake acknowledged: the client's connection is
// fully up. (Dropping a connection before discordgo's heartbeat loop started makes discordgo
// reconnect twice at once.)
func (f *FakeDiscord) WaitHeartbeat(t testing.TB) {
	t.Helper()
	select {
	case <-f.heartbeats:
	case <-time.After(10 * time.Second):
		t.Fatal("fake gateway: no heartbeat")
	}
}

// Dispatch sends a gateway event on the current connection.
func (f *FakeDiscord) Dispatch(t testing.TB, typ string, d any) {
	t.Helper()
	f.connMu.Lock()
	defer f.connMu.Unlock()
	f.seq++
	if err := f.conn.WriteJSON(map[string]any{"op": 0, "t": typ, "s": f.seq, "d": d}); err != nil {
		t.Fatalf("fake gateway: dispatch %s: %v", typ, err)
	}
}

// Drop cuts the current gateway connection without a close frame, as a network failure
// would.
func (f *FakeDiscord) Drop() {
	f.connMu.Lock()
	defer f.connMu.Unlock()
	f.conn.UnderlyingConn().Close()
}

// Interaction registers a fresh interaction token at the fake's clock and returns it.
func (f *FakeDiscord) Interaction() (id, token string) {
	id = f.newID()
	token = "tok-" + id
	f.mu.Lock()
	f.tokens[token] = f.now
	f.mu.Unlock()
	return id, token
}

// SlashPayload is an INTERACTION_CREATE for a command in a text channel (or in a thread, if
// parent is set).
func SlashPayload(id, token, channel, parent, name string, options ...map[string]any) map[string]any {
	ch := map[string]any{"id": channel, "type": 0}
	if parent != "" {
		ch = map[string]any{"id": channel, "type": 11, "parent_id": parent}
	}
	opts := []any{}
	for _, o := range options {
		opts = append(opts, o)
	}
	return map[string]any{
		"id": id, "application_id": fakeAppID, "type": 2, "token": token, "version": 1,
		"guild_id": fakeGuildID, "channel_id": channel, "channel": ch,
		"member": map[string]any{"nick": "Alice", "user": map[string]any{"id": fakeUserID, "username": "alice"}},
		"data":   map[string]any{"id": "800000000000000001", "name": name, "type": 1, "options": opts},
	}
}

// GoalOption is the goal option of /loopbot.
func GoalOption(goal string) map[string]any {
	return map[string]any{"name": "goal", "type": 3, "value": goal}
}

// ButtonPayload is an INTERACTION_CREATE for a button on a message in a thread.
func ButtonPayload(id, token, thread, parent, messageID, customID, userID string) map[string]any {
	return map[string]any{
		"id": id, "application_id": fakeAppID, "type": 3, "token": token, "version": 1,
		"guild_id": fakeGuildID, "channel_id": thread,
		"channel": map[string]any{"id": thread, "type": 11, "parent_id": parent},
		"member":  map[string]any{"user": map[string]any{"id": userID, "username": "user-" + userID}},
		"message": map[string]any{"id": messageID, "channel_id": thread},
		"data":    map[string]any{"custom_id": customID, "component_type": 2},
	}
}

// MessagePayload is a MESSAGE_CREATE by a user.
func MessagePayload(id, channel, content string, mentions ...string) map[string]any {
	ms := []any{}
	for _, m := range mentions {
		ms = append(ms, map[string]any{"id": m, "username": "loopbot", "bot": true})
	}
	return map[string]any{
		"id": id, "channel_id": channel, "guild_id": fakeGuildID, "type": 0, "content": content,
		"author":   map[string]any{"id": fakeUserID, "username": "alice"},
		"mentions": ms,
	}
}
