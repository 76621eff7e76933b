// Package mcpclient is the client side of the Model Context Protocol that loopbot uses: it
// connects to a server over stdio or streamable HTTP, lists and calls its tools, and
// answers the server's requests for a completion (sampling) or for input from the user
// (elicitation). It speaks protocol version 2025-11-25 and the versions before it that
// servers still answer with.
//
// It replaces the official Go SDK in the binary: the SDK holds client and server in one
// package, which linked encoding/gob (for the server's cursors) and a JSON library of its
// own, 2.2 MB of binary and 1.3 MB of the idle daemon's resident memory, for the few
// messages a client sends. The tests still run it against the SDK's server and the
// reference server of the TypeScript SDK.
package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"
)

// How long loopbot waits to tell a server a call was cancelled, and to send it the answer
// to one of its requests.
const (
	cancelNoticeTimeout = 5 * time.Second
	responseTimeout     = 30 * time.Second
)

// ProtocolVersion is the version loopbot asks for.
const ProtocolVersion = "2025-11-25"

// supportedVersions are the versions loopbot accepts from a server, newest first.
var supportedVersions = []string{ProtocolVersion, "2025-06-18", "2025-03-26", "2024-11-05"}

var (
	// ErrConnectionClosed is the error of a call on a connection that ended.
	ErrConnectionClosed = errors.New("mcp: connection closed")
	// ErrSessionMissing is the error of a call to an HTTP server that no longer knows the
	// session (it restarted): only a new connection helps.
	ErrSessionMissing = errors.New("mcp: session missing")
)

// RPCError is an error a server answered a request with.
type RPCError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// JSON-RPC error codes loopbot answers with.
const (
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
)

// Options configure a session: the handlers for the requests a server may send. A nil
// handler leaves the capability out.
type Options struct {
	// Name and Version are the client's, sent in the handshake.
	Name, Version string
	// Sample answers sampling/createMessage; nil does not advertise sampling.
	Sample func(ctx context.Context, p *CreateMessageParams) (*CreateMessageResult, error)
	// Elicit answers elicitation/create in form mode; nil does not advertise elicitation.
	Elicit func(ctx context.Context, p *ElicitParams) (*ElicitResult, error)
	// ToolsChanged hears notifications/tools/list_changed. It runs on the session's reader
	// and must not call the session itself.
	ToolsChanged func()
}

// message is any JSON-RPC 2.0 message: a request (ID and Method), a notification (Method
// alone) or a response (ID and Result or Error).
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// conn carries messages to and from a server. A conn hands what arrives to the session's
// deliver and reports its end to the session's fail.
type conn interface {
	// send writes one message. call says it is a request that expects a response, whose
	// id is given: an HTTP conn reads the response from the request's own reply.
	send(ctx context.Context, msg []byte, call bool, id int64) error
	// initialized tells the conn the handshake is done, with the version agreed.
	initialized(version string)
	close() error
}

// Session is one connection to a server, after the handshake.
type Session struct {
	conn conn
	opts Options

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan *message
	failed  chan struct{} // closed by fail
	err     error         // why the session ended, set before failed is closed

	// life ends the handlers of the server's requests when the session ends; serving
	// holds the cancel of each request being answered, by its id as the server wrote it,
	// for the server to cancel.
	life    context.Context
	cancel  context.CancelFunc
	serving map[string]context.CancelFunc
}

func newSession(opts Options) *Session {
	life, cancel := context.WithCancel(context.Background())
	return &Session{opts: opts, pending: map[int64]chan *message{}, serving: map[string]context.CancelFunc{}, failed: make(chan struct{}), life: life, cancel: cancel}
}

// handshake sends initialize and notifications/initialized.
func (s *Session) handshake(ctx context.Context) error {
	caps := map[string]any{}
	if s.opts.Elicit != nil {
		caps["elicitation"] = map[string]any{"form": map[string]any{}}
	}
	if s.opts.Sample != nil {
		caps["sampling"] = map[string]any{}
	}
	params := map[string]any{
		"protocolVersion": ProtocolVersion,
		"capabilities":    caps,
		"clientInfo":      map[string]string{"name": s.opts.Name, "version": s.opts.Version},
	}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := s.call(ctx, "initialize", params, &res); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if !slices.Contains(supportedVersions, res.ProtocolVersion) {
		return fmt.Errorf("initialize: the server speaks protocol version %q, which loopbot does not", res.ProtocolVersion)
	}
	s.conn.initialized(res.ProtocolVersion)
	if err := s.notify(ctx, "notifications/initialized", map[string]any{}); err != nil {
		return fmt.Errorf("initialized: %w", err)
	}
	return nil
}

// ListTools lists every tool of the server, page after page.
func (s *Session) ListTools(ctx context.Context) ([]Tool, error) {
	var out []Tool
	cursor := ""
	for page := 0; ; page++ {
		if page > 1000 {
			return nil, errors.New("list tools: more than 1000 pages")
		}
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		var res struct {
			Tools      []Tool `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := s.call(ctx, "tools/list", params, &res); err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		out = append(out, res.Tools...)
		if res.NextCursor == "" {
			return out, nil
		}
		cursor = res.NextCursor
	}
}

// CallTool calls a tool with args (a JSON object) and meta (the request's _meta, or nil).
func (s *Session) CallTool(ctx context.Context, name string, args json.RawMessage, meta map[string]any) (*CallToolResult, error) {
	params := map[string]any{"name": name}
	if len(args) > 0 {
		params["arguments"] = args
	}
	if len(meta) > 0 {
		params["_meta"] = meta
	}
	var res CallToolResult
	if err := s.call(ctx, "tools/call", params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Wait blocks until the session ends and returns why.
func (s *Session) Wait() error {
	<-s.failed
	return s.err
}

// Close ends the session and its connection.
func (s *Session) Close() error {
	s.fail(ErrConnectionClosed)
	return s.conn.close()
}

// call sends a request and decodes its result into out.
func (s *Session) call(ctx context.Context, method string, params any, out any) error {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	s.nextID++
	id := s.nextID
	ch := make(chan *message, 1)
	s.pending[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
	}()

	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	b, err := json.Marshal(message{JSONRPC: "2.0", ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: p})
	if err != nil {
		return err
	}
	if err := s.conn.send(ctx, b, true, id); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case resp := <-ch:
		if resp.Error != nil {
			return resp.Error
		}
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(resp.Result, out); err != nil {
			return fmt.Errorf("%s: read the result: %w", method, err)
		}
		return nil
	case <-s.failed:
		return s.err
	case <-ctx.Done():
		// The server is told, so that it can stop the work; it may answer anyway, and
		// the answer is dropped.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelNoticeTimeout)
		defer cancel()
		_ = s.notify(cctx, "notifications/cancelled", map[string]any{"requestId": id, "reason": context.Cause(ctx).Error()})
		return ctx.Err()
	}
}

// notify sends a notification.
func (s *Session) notify(ctx context.Context, method string, params any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	b, err := json.Marshal(message{JSONRPC: "2.0", Method: method, Params: p})
	if err != nil {
		return err
	}
	return s.conn.send(ctx, b, false, 0)
}

// fail ends the session with err, once; calls waiting get err.
func (s *Session) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.err = err
	close(s.failed)
	s.cancel()
}

// unanswered fails the call id, if it still waits, with err: an HTTP reply ended without
// its response.
func (s *Session) unanswered(id int64, err error) {
	s.mu.Lock()
	ch, ok := s.pending[id]
	s.mu.Unlock()
	if !ok {
		return
	}
	select {
	case ch <- &message{Error: &RPCError{Code: codeInternal, Message: err.Error()}}:
	default:
	}
}

// deliver handles one message from the server.
func (s *Session) deliver(raw []byte) {
	var msg message
	if err := json.Unmarshal(raw, &msg); err != nil {
		return // not JSON-RPC: nothing can be answered
	}
	switch {
	case msg.Method != "" && len(msg.ID) > 0:
		go s.serve(&msg)
	case msg.Method == "notifications/tools/list_changed":
		if s.opts.ToolsChanged != nil {
			s.opts.ToolsChanged()
		}
	case msg.Method == "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(msg.Params, &p) == nil {
			s.mu.Lock()
			cancel := s.serving[string(p.RequestID)]
			s.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
	case len(msg.ID) > 0:
		id, err := strconv.ParseInt(string(msg.ID), 10, 64)
		if err != nil {
			return // not an id loopbot sent
		}
		s.mu.Lock()
		ch, ok := s.pending[id]
		s.mu.Unlock()
		if ok {
			select {
			case ch <- &msg:
			default:
			}
		}
	}
}

// serve answers one request of the server.
func (s *Session) serve(req *message) {
	ctx, cancel := context.WithCancel(s.life)
	defer cancel()
	key := string(req.ID)
	s.mu.Lock()
	s.serving[key] = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.serving, key)
		s.mu.Unlock()
	}()
	var result any
	var rerr *RPCError
	switch req.Method {
	case "ping":
		result = map[string]any{}
	case "sampling/createMessage":
		result, rerr = serveWith(ctx, req.Params, s.opts.Sample, "sampling")
	case "elicitation/create":
		result, rerr = serveWith(ctx, req.Params, s.opts.Elicit, "elicitation")
	default:
		rerr = &RPCError{Code: codeMethodNotFound, Message: "method not found: " + req.Method}
	}
	resp := message{JSONRPC: "2.0", ID: req.ID, Error: rerr}
	if rerr == nil {
		b, err := json.Marshal(result)
		if err != nil {
			resp.Error = &RPCError{Code: codeInternal, Message: err.Error()}
		} else {
			resp.Result = b
		}
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return
	}
	sctx, scancel := context.WithTimeout(s.life, responseTimeout)
	defer scancel()
	_ = s.conn.send(sctx, b, false, 0)
}

// serveWith reads a request's params and answers it with handle, or says the capability,
// named by what, is not offered.
func serveWith[P, R any](ctx context.Context, params json.RawMessage, handle func(context.Context, *P) (*R, error), what string) (any, *RPCError) {
	if handle == nil {
		return nil, &RPCError{Code: codeMethodNotFound, Message: what + " is not offered"}
	}
	var p P
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &RPCError{Code: codeInvalidParams, Message: err.Error()}
	}
	res, err := handle(ctx, &p)
	if err != nil {
		return nil, &RPCError{Code: codeInternal, Message: err.Error()}
	}
	return res, nil
}
