package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeConn records what a session sends; a test plays the server through the session's
// deliver.
type fakeConn struct {
	sent    chan message
	version string
}

func (c *fakeConn) send(ctx context.Context, msg []byte, call bool, id int64) error {
	var m message
	if err := json.Unmarshal(msg, &m); err != nil {
		return err
	}
	c.sent <- m
	return nil
}

func (c *fakeConn) initialized(v string) { c.version = v }
func (c *fakeConn) close() error         { return nil }

func newFake(opts Options) (*Session, *fakeConn) {
	s := newSession(opts)
	c := &fakeConn{sent: make(chan message, 16)}
	s.conn = c
	return s, c
}

func next(t *testing.T, c *fakeConn) message {
	t.Helper()
	select {
	case m := <-c.sent:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("nothing sent")
		return message{}
	}
}

// answer plays the server's response to the request the session sent.
func answer(s *Session, req message, result string) {
	s.deliver([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":` + result + `}`))
}

func TestHandshake(t *testing.T) {
	tests := []struct {
		name     string
		opts     Options
		version  string
		wantCaps string
		wantErr  string
	}{
		{"both", Options{Sample: func(context.Context, *CreateMessageParams) (*CreateMessageResult, error) { return nil, nil },
			Elicit: func(context.Context, *ElicitParams) (*ElicitResult, error) { return nil, nil }},
			"2025-11-25", `{"elicitation":{"form":{}},"sampling":{}}`, ""},
		{"none", Options{}, "2025-06-18", `{}`, ""},
		{"a version loopbot does not speak", Options{}, "2099-01-01", `{}`, "does not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := newFake(tt.opts)
			done := make(chan error, 1)
			go func() { done <- s.handshake(t.Context()) }()
			init := next(t, c)
			var p struct {
				ProtocolVersion string          `json:"protocolVersion"`
				Capabilities    json.RawMessage `json:"capabilities"`
			}
			if err := json.Unmarshal(init.Params, &p); err != nil || init.Method != "initialize" || p.ProtocolVersion != ProtocolVersion {
				t.Fatalf("first message %+v (%v)", init, err)
			}
			if string(p.Capabilities) != tt.wantCaps {
				t.Errorf("capabilities %s, want %s", p.Capabilities, tt.wantCaps)
			}
			answer(s, init, `{"protocolVersion":"`+tt.version+`","capabilities":{},"serverInfo":{"name":"x","version":"1"}}`)
			if tt.wantErr != "" {
				if err := <-done; err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("handshake = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if m := next(t, c); m.Method != "notifications/initialized" || len(m.ID) != 0 {
				t.Errorf("second message %+v", m)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if c.version != tt.version {
				t.Errorf("conn told version %q, want %q", c.version, tt.version)
			}
		})
	}
}

// The session answers what a server may ask, and refuses what loopbot does not offer.
func TestServerRequests(t *testing.T) {
	sampled := make(chan *CreateMessageParams, 1)
	s, c := newFake(Options{Sample: func(ctx context.Context, p *CreateMessageParams) (*CreateMessageResult, error) {
		sampled <- p
		return &CreateMessageResult{Role: "assistant", Content: Content{Type: "text", Text: "fine"}, Model: "m"}, nil
	}})
	tests := []struct {
		req, want string
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"ping"}`, `{"jsonrpc":"2.0","id":7,"result":{}}`},
		{`{"jsonrpc":"2.0","id":"a","method":"roots/list"}`, `{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"method not found: roots/list"}}`},
		{`{"jsonrpc":"2.0","id":8,"method":"elicitation/create","params":{"message":"?"}}`, `{"jsonrpc":"2.0","id":8,"error":{"code":-32601,"message":"elicitation is not offered"}}`},
		{`{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":5}}`,
			`{"jsonrpc":"2.0","id":9,"result":{"role":"assistant","content":{"type":"text","text":"fine"},"model":"m"}}`},
		{`{"jsonrpc":"2.0","id":10,"method":"sampling/createMessage","params":{"messages":"no"}}`, `"code":-32602`},
	}
	for _, tt := range tests {
		s.deliver([]byte(tt.req))
		m := next(t, c)
		b, _ := json.Marshal(m)
		if !strings.Contains(string(b), tt.want) {
			t.Errorf("%s answered %s, want %s", tt.req, b, tt.want)
		}
	}
	if p := <-sampled; len(p.Messages) != 1 || p.Messages[0].Content.Text != "hi" || p.MaxTokens != 5 {
		t.Errorf("sampling params %+v", p)
	}
}

// A call whose context ends tells the server, and a server's cancellation ends the handler
// of its request.
func TestCancellation(t *testing.T) {
	handling := make(chan struct{})
	ended := make(chan error, 1)
	s, c := newFake(Options{Elicit: func(ctx context.Context, p *ElicitParams) (*ElicitResult, error) {
		close(handling)
		<-ctx.Done()
		ended <- ctx.Err()
		return &ElicitResult{Action: "cancel"}, nil
	}})

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := s.CallTool(ctx, "slow", json.RawMessage(`{}`), map[string]any{"k": "v"})
		done <- err
	}()
	req := next(t, c)
	if req.Method != "tools/call" || !strings.Contains(string(req.Params), `"_meta":{"k":"v"}`) {
		t.Errorf("call %s %s", req.Method, req.Params)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call = %v", err)
	}
	if m := next(t, c); m.Method != "notifications/cancelled" || !strings.Contains(string(m.Params), `"requestId":`+string(req.ID)) {
		t.Errorf("after cancelling: %s %s", m.Method, m.Params)
	}
	answer(s, req, `{"content":[]}`) // a late answer is dropped

	s.deliver([]byte(`{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{"message":"?"}}`))
	<-handling
	s.deliver([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"e1"}}`))
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Errorf("handler context = %v", err)
	}
	next(t, c) // the handler's answer
}

// A server's error answer and the end of the session reach the caller.
func TestCallErrors(t *testing.T) {
	s, c := newFake(Options{})
	done := make(chan error, 1)
	go func() {
		_, err := s.ListTools(t.Context())
		done <- err
	}()
	req := next(t, c)
	s.deliver([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32603,"message":"broken"}}`))
	var rerr *RPCError
	if err := <-done; !errors.As(err, &rerr) || rerr.Message != "broken" {
		t.Errorf("list = %v", err)
	}

	go func() {
		_, err := s.CallTool(t.Context(), "x", nil, nil)
		done <- err
	}()
	next(t, c)
	s.fail(ErrConnectionClosed)
	if err := <-done; !errors.Is(err, ErrConnectionClosed) {
		t.Errorf("call on an ended session = %v", err)
	}
	if err := s.Wait(); !errors.Is(err, ErrConnectionClosed) {
		t.Errorf("wait = %v", err)
	}
	if _, err := s.CallTool(t.Context(), "x", nil, nil); !errors.Is(err, ErrConnectionClosed) {
		t.Errorf("call after the end = %v", err)
	}
}

// Tools are listed page after page.
func TestListToolsPages(t *testing.T) {
	s, c := newFake(Options{})
	done := make(chan []Tool, 1)
	go func() {
		tools, err := s.ListTools(t.Context())
		if err != nil {
			t.Error(err)
		}
		done <- tools
	}()
	first := next(t, c)
	answer(s, first, `{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"p2"}`)
	second := next(t, c)
	if !strings.Contains(string(second.Params), `"cursor":"p2"`) {
		t.Errorf("second page asked with %s", second.Params)
	}
	answer(s, second, `{"tools":[{"name":"b","description":"B"}]}`)
	tools := <-done
	if len(tools) != 2 || tools[0].Name != "a" || string(tools[0].InputSchema) != `{"type":"object"}` || tools[1].Description != "B" {
		t.Errorf("tools %+v", tools)
	}
}

func TestSamplingMessageContent(t *testing.T) {
	tests := []struct {
		raw, want string
		ok        bool
	}{
		{`{"role":"user","content":{"type":"text","text":"a"}}`, "a", true},
		{`{"role":"user","content":[{"type":"text","text":"b"}]}`, "b", true},
		{`{"role":"user","content":[{"type":"text","text":"b"},{"type":"text","text":"c"}]}`, "", false},
		{`{"role":"user","content":null}`, "", false},
		{`{"role":"user"}`, "", false},
	}
	for _, tt := range tests {
		var m SamplingMessage
		err := json.Unmarshal([]byte(tt.raw), &m)
		if (err == nil) != tt.ok || err == nil && m.Content.Text != tt.want {
			t.Errorf("%s: %+v, %v", tt.raw, m, err)
		}
	}
}

func TestDataLen(t *testing.T) {
	for data, want := range map[string]int{"": 0, "AQ==": 1, "AQI=": 2, "AQID": 3, "AQIDBA==": 4} {
		if got := (Content{Data: data}).DataLen(); got != want {
			t.Errorf("DataLen(%q) = %d, want %d", data, got, want)
		}
	}
}
