package discordfake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Identities of the fake Discord: the application (whose bot user has the same ID, as on
// Discord), the guild, its one text channel and the user who acts in the payloads.
const (
	AppID   = "900000000000000001"
	BotID   = "900000000000000001"
	GuildID = "900000000000000002"
	Channel = "900000000000000003"
	UserID  = "900000000000000004"
)

// TokenLife is how long an interaction token is accepted after its interaction.
const TokenLife = 15 * time.Minute

// Server is a fake Discord: REST routes and a gateway websocket on one local HTTP server.
// Build it with New and stop it with Close. It is safe for concurrent use.
type Server struct {
	srv *httptest.Server

	mu       sync.Mutex
	now      time.Time
	nextID   int64
	requests []Request
	messages map[string]*Message
	channels map[string]map[string]any
	// history is what GET /channels/{id}/messages serves per channel: message objects as
	// Discord returns them, scripted by AddHistory, oldest first.
	history map[string][]map[string]any
	tokens  map[string]time.Time // interaction token -> issued, on the fake's clock
	acked   map[string]bool      // interaction IDs whose callback was answered
	faults  []*Fault
	order   []string
	errs    []error
	// changed is closed and replaced at every change a test may wait for: a request, a
	// message stored, a gateway handshake or heartbeat.
	changed    chan struct{}
	handshakes []string // "identify" or "resume", one per gateway connection
	taken      int      // handshakes WaitHandshake has returned
	beat       int      // the latest connection (1-based) that had a heartbeat acked

	// gwMu guards the gateway's session and serialises writes to its sockets.
	gwMu     sync.Mutex
	closed   bool
	conn     *websocket.Conn // the current connection, nil while the client is away
	conns    map[*websocket.Conn]bool
	session  string
	sessions int
	seq      int64
	events   []event // the session's dispatches, for Resume to replay
	gwWork   sync.WaitGroup
}

// Request is one REST request the fake received.
type Request struct {
	Method, Path string
	// Query is the raw query string ("before=...&limit=50").
	Query string
	// Auth is the Authorization header ("Bot <token>").
	Auth string
	// Body is a JSON object body (for a multipart request, its payload_json), List a JSON
	// array body.
	Body map[string]any
	List []any
	// Files are the attachments of a multipart request: file name -> content.
	Files map[string]string
	// At is when the fake received the request, on the real clock: a test checks with it
	// that a wait the fake asked for was kept.
	At time.Time
	// Status is the status the fake answered with, 0 while the answer is being written.
	Status int
}

// Message is a message as the fake holds it.
type Message struct {
	ID, ChannelID string
	// Payload is the body of the request that created it or, after edits, of the last edit.
	Payload map[string]any
	Edits   int
}

// Fault makes the fake answer matching requests with an error instead of serving them. A
// request is offered to the first fault that matches it.
type Fault struct {
	// Method and Path select the requests; Path is a whole path such as
	// "/api/v9/channels/*/messages", where "*" stands for any one segment.
	Method, Path string
	// Skip is how many matching requests are served normally before the fault applies.
	Skip int
	// Times is how many requests the fault answers (after Skip); 0 means one.
	Times int
	// Status, Body and Header are the answer. Content-Type is application/json.
	Status int
	Body   string
	Header http.Header
}

type event struct {
	seq int64
	typ string
	d   json.RawMessage
}

// New starts a fake Discord on a free port of the loopback interface.
func New() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("discordfake: listen: %w", err)
	}
	f := &Server{
		now:      time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		nextID:   1000000000000000000,
		messages: map[string]*Message{},
		channels: map[string]map[string]any{Channel: {"id": Channel, "type": 0, "guild_id": GuildID}},
		history:  map[string][]map[string]any{},
		tokens:   map[string]time.Time{},
		acked:    map[string]bool{},
		changed:  make(chan struct{}),
		conns:    map[*websocket.Conn]bool{},
	}
	f.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: f.record(f.routes()), ReadHeaderTimeout: 10 * time.Second}}
	f.srv.Start()
	return f, nil
}

// Close cuts the gateway connections and stops the server, waiting for the requests under
// way.
func (f *Server) Close() {
	f.gwMu.Lock()
	f.closed = true
	for c := range f.conns {
		c.UnderlyingConn().Close()
	}
	f.gwMu.Unlock()
	f.srv.Close()
	f.gwWork.Wait()
}

// URL is the base to configure as the API URL (it replaces https://discord.com/).
func (f *Server) URL() string { return f.srv.URL + "/" }

// Err reports what the fake found wrong in what it was sent: bodies that are not JSON,
// gateway opcodes it did not expect. It is nil when all was well.
func (f *Server) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.errs...)
}

func (f *Server) fail(err error) {
	f.mu.Lock()
	f.errs = append(f.errs, err)
	f.notifyLocked()
	f.mu.Unlock()
}

// notifyLocked wakes the waiters; f.mu is held.
func (f *Server) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Advance moves the fake's clock, which decides whether interaction tokens are alive.
func (f *Server) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// Now is the fake's clock.
func (f *Server) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Inject adds a fault.
func (f *Server) Inject(fl Fault) {
	if fl.Times <= 0 {
		fl.Times = 1
	}
	f.mu.Lock()
	f.faults = append(f.faults, &fl)
	f.mu.Unlock()
}

// Fail makes the next request that matches method and path fail with status, body and
// header.
func (f *Server) Fail(method, path string, status int, body string, header http.Header) {
	f.Inject(Fault{Method: method, Path: path, Status: status, Body: body, Header: header})
}

// RateLimit makes the next times requests that match method and path answer 429 as
// Discord does: {"message": ..., "retry_after": seconds, "global": false} with Retry-After
// (whole seconds, rounded up) and the X-RateLimit-* headers of an exhausted bucket.
func (f *Server) RateLimit(method, path string, times int, retryAfter time.Duration) {
	f.Inject(RateLimitFault(method, path, times, retryAfter))
}

// RateLimitFault is the fault RateLimit injects.
func RateLimitFault(method, path string, times int, retryAfter time.Duration) Fault {
	secs := retryAfter.Seconds()
	return Fault{
		Method: method, Path: path, Times: times, Status: http.StatusTooManyRequests,
		Body: fmt.Sprintf(`{"message": "You are being rate limited.", "retry_after": %.3f, "global": false}`, secs),
		Header: http.Header{
			"Retry-After":             {fmt.Sprint(int(math.Ceil(secs)))},
			"X-Ratelimit-Limit":       {"5"},
			"X-Ratelimit-Remaining":   {"0"},
			"X-Ratelimit-Reset":       {fmt.Sprintf("%.3f", float64(time.Now().Add(retryAfter).UnixMilli())/1000)},
			"X-Ratelimit-Reset-After": {fmt.Sprintf("%.3f", secs)},
			"X-Ratelimit-Bucket":      {"fake0bucket"},
			"X-Ratelimit-Scope":       {"user"},
		},
	}
}

// takeFaultLocked finds the fault that answers a request, if any; f.mu is held.
func (f *Server) takeFaultLocked(method, path string) *Fault {
	for i, fl := range f.faults {
		if fl.Method != method || !pathMatch(fl.Path, path) {
			continue
		}
		if fl.Skip > 0 {
			fl.Skip--
			return nil
		}
		fl.Times--
		if fl.Times == 0 {
			f.faults = append(f.faults[:i], f.faults[i+1:]...)
		}
		return fl
	}
	return nil
}

// Mark appends to the order log, which also records interaction callbacks.
func (f *Server) Mark(s string) {
	f.mu.Lock()
	f.order = append(f.order, s)
	f.mu.Unlock()
}

// Order is the order log.
func (f *Server) Order() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.order...)
}

// Requests returns the requests received so far, in order.
func (f *Server) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// WaitUntil waits until cond holds, checking it after every change of the fake (requests,
// their answers, messages, gateway handshakes and heartbeats), or until ctx ends.
func (f *Server) WaitUntil(ctx context.Context, cond func() bool) error {
	for {
		f.mu.Lock()
		changed := f.changed
		f.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitFor waits until pred holds for the requests received so far and returns them.
func (f *Server) WaitFor(ctx context.Context, pred func([]Request) bool) ([]Request, error) {
	var reqs []Request
	err := f.WaitUntil(ctx, func() bool {
		reqs = f.Requests()
		return pred(reqs)
	})
	if err != nil {
		return reqs, fmt.Errorf("%w; requests so far:\n%s", err, Describe(reqs))
	}
	return reqs, nil
}

// Find returns the requests with the method whose path matches the pattern, where "*"
// stands for one path segment.
func Find(reqs []Request, method, pattern string) []Request {
	var out []Request
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

// Describe lists requests one per line, with the status they were answered with, for a
// test's failure message.
func Describe(reqs []Request) string {
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "  %s %s %s -> %d\n", r.At.Format("15:04:05.000"), r.Method, r.Path, r.Status)
	}
	return b.String()
}

// Texts returns everything the fake was sent that people could see: the JSON bodies of all
// requests but GETs (messages, edits, interaction answers, thread names, commands) and the
// attached files.
func (f *Server) Texts() []string {
	var out []string
	for _, r := range f.Requests() {
		if r.Method == http.MethodGet {
			continue
		}
		if r.Body != nil {
			b, _ := json.Marshal(r.Body)
			out = append(out, string(b))
		}
		if r.List != nil {
			b, _ := json.Marshal(r.List)
			out = append(out, string(b))
		}
		for name, content := range r.Files {
			out = append(out, name, content)
		}
	}
	return out
}

// Message returns a message by ID.
func (f *Server) Message(id string) (Message, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.messages[id]
	if !ok {
		return Message{}, false
	}
	return *m, true
}

// ChannelMessages returns the messages of a channel (or thread), oldest first.
func (f *Server) ChannelMessages(ch string) []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Message
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

// AddChannel makes a channel known to the fake; ch is the channel object Discord returns,
// with at least "id".
func (f *Server) AddChannel(ch map[string]any) {
	f.mu.Lock()
	f.channels[ch["id"].(string)] = ch
	f.mu.Unlock()
}

// AddHistory appends messages (message objects as Discord returns them, with at least "id")
// to what GET /channels/{ch}/messages serves for ch. Give them oldest first.
func (f *Server) AddHistory(ch string, msgs ...map[string]any) {
	f.mu.Lock()
	f.history[ch] = append(f.history[ch], msgs...)
	f.mu.Unlock()
}

// olderID reports whether snowflake a is older than b: snowflakes grow with time, so the
// shorter string, or the smaller one of the same length, is older.
func olderID(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// channelHistory answers GET /channels/{ch}/messages as Discord does for before and limit:
// the newest messages older than before, newest first, limit of them (50 when not given,
// at most 100). Unknown channels get Discord's 404.
func (f *Server) channelHistory(w http.ResponseWriter, r *http.Request) {
	ch := r.PathValue("ch")
	q := r.URL.Query()
	limit := 50
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 100 {
			writeJSON(w, 400, map[string]any{"code": 50035, "message": "Invalid Form Body"})
			return
		}
		limit = n
	}
	before := q.Get("before")
	f.mu.Lock()
	_, known := f.channels[ch]
	msgs := f.history[ch]
	out := []map[string]any{}
	for i := len(msgs) - 1; i >= 0 && len(out) < limit; i-- {
		id, _ := msgs[i]["id"].(string)
		if before == "" || olderID(id, before) {
			out = append(out, msgs[i])
		}
	}
	f.mu.Unlock()
	if !known && len(msgs) == 0 {
		writeJSON(w, 404, map[string]any{"code": 10003, "message": "Unknown Channel"})
		return
	}
	writeJSON(w, 200, out)
}

// Interaction registers a fresh interaction at the fake's clock and returns its ID and
// token.
func (f *Server) Interaction() (id, token string) {
	id = f.newID()
	token = "tok-" + id
	f.mu.Lock()
	f.tokens[token] = f.now
	f.mu.Unlock()
	return id, token
}

func (f *Server) newID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	return fmt.Sprint(f.nextID)
}

type requestKey struct{}

// body is the decoded body of the request being served.
func body(r *http.Request) map[string]any {
	req, _ := r.Context().Value(requestKey{}).(Request)
	return req.Body
}

func list(r *http.Request) []any {
	req, _ := r.Context().Value(requestKey{}).(Request)
	return req.List
}

func (f *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v9/gateway", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"url": f.gatewayURL()})
	})
	mux.HandleFunc("GET /api/v9/gateway/bot", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"url": f.gatewayURL(), "shards": 1,
			"session_start_limit": map[string]any{"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}})
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
		again := f.acked[r.PathValue("id")]
		f.acked[r.PathValue("id")] = true
		if !again {
			f.order = append(f.order, "callback")
		}
		f.mu.Unlock()
		if again {
			writeJSON(w, 400, map[string]any{"code": 40060, "message": "Interaction has already been acknowledged."})
			return
		}
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
		writeJSON(w, 200, f.putMessage(id, Channel, body(r)))
	})
	mux.HandleFunc("POST /api/v9/webhooks/{app}/{token}", func(w http.ResponseWriter, r *http.Request) {
		if !f.tokenAlive(w, r.PathValue("token")) {
			return
		}
		writeJSON(w, 200, f.putMessage(f.newID(), Channel, body(r)))
	})
	mux.HandleFunc("POST /api/v9/channels/{ch}/messages", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, f.putMessage(f.newID(), r.PathValue("ch"), body(r)))
	})
	mux.HandleFunc("PATCH /api/v9/channels/{ch}/messages/{msg}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		m, ok := f.messages[r.PathValue("msg")]
		f.mu.Unlock()
		if !ok || m.ChannelID != r.PathValue("ch") {
			writeJSON(w, 404, map[string]any{"code": 10008, "message": "Unknown Message"})
			return
		}
		writeJSON(w, 200, f.putMessage(m.ID, m.ChannelID, body(r)))
	})
	mux.HandleFunc("POST /api/v9/channels/{ch}/messages/{msg}/threads", func(w http.ResponseWriter, r *http.Request) {
		// Discord gives a thread started from a message the message's ID.
		id, parent := r.PathValue("msg"), r.PathValue("ch")
		f.mu.Lock()
		_, exists := f.channels[id]
		ch := map[string]any{"id": id, "type": 11, "parent_id": parent, "owner_id": BotID, "guild_id": GuildID, "name": body(r)["name"]}
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
	mux.HandleFunc("GET /api/v9/channels/{ch}/messages", f.channelHistory)
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
	mux.HandleFunc("GET /api/v9/users/@me", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"id": BotID, "username": "loopbot", "bot": true})
	})
	return mux
}

// commands answers a bulk overwrite of application commands with the commands.
func (f *Server) commands(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, list(r))
}

func (f *Server) putMessage(id, ch string, payload map[string]any) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.messages[id]
	if !ok {
		m = &Message{ID: id, ChannelID: ch}
		f.messages[id] = m
	} else {
		m.Edits++
	}
	m.Payload = payload
	f.notifyLocked()
	return map[string]any{"id": id, "channel_id": ch, "content": payload["content"], "author": map[string]any{"id": BotID, "username": "loopbot", "bot": true}}
}

// tokenAlive answers 401 for an interaction token that is unknown or older than TokenLife,
// as Discord does.
func (f *Server) tokenAlive(w http.ResponseWriter, token string) bool {
	f.mu.Lock()
	issued, ok := f.tokens[token]
	alive := ok && f.now.Sub(issued) < TokenLife
	f.mu.Unlock()
	if !alive {
		writeJSON(w, 401, map[string]any{"code": 50027, "message": "Invalid Webhook Token"})
	}
	return alive
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// record logs every REST request, decoding JSON and multipart bodies, and answers the
// faults.
func (f *Server) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/gw") {
			next.ServeHTTP(w, r)
			return
		}
		req := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"), At: time.Now()}
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			f.fail(fmt.Errorf("%s %s: read body: %w", r.Method, r.URL.Path, err))
		}
		if mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
			raw, req.Files = f.multipart(r, raw, params["boundary"])
		}
		if len(raw) > 0 {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				f.fail(fmt.Errorf("%s %s: body is not JSON: %w", r.Method, r.URL.Path, err))
			}
			req.Body, _ = v.(map[string]any)
			req.List, _ = v.([]any)
		}
		f.mu.Lock()
		i := len(f.requests)
		f.requests = append(f.requests, req)
		fault := f.takeFaultLocked(r.Method, r.URL.Path)
		f.notifyLocked()
		f.mu.Unlock()

		sw := &statusWriter{ResponseWriter: w}
		if fault != nil {
			for k, vs := range fault.Header {
				sw.Header()[k] = vs
			}
			sw.Header().Set("Content-Type", "application/json")
			sw.WriteHeader(fault.Status)
			io.WriteString(sw, fault.Body)
		} else {
			next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), requestKey{}, req)))
		}
		f.mu.Lock()
		f.requests[i].Status = sw.status
		f.notifyLocked()
		f.mu.Unlock()
	})
}

// multipart splits a multipart body into its payload_json and its files.
func (f *Server) multipart(r *http.Request, raw []byte, boundary string) ([]byte, map[string]string) {
	files := map[string]string{}
	var payload []byte
	mr := multipart.NewReader(strings.NewReader(string(raw)), boundary)
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			f.fail(fmt.Errorf("%s %s: multipart body: %w", r.Method, r.URL.Path, err))
			break
		}
		b, _ := io.ReadAll(p)
		if p.FormName() == "payload_json" {
			payload = b
		} else {
			files[p.FileName()] = string(b)
		}
	}
	return payload, files
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
