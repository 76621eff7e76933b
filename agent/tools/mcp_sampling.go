//lint:file-ignore SA1019 MCP sampling is deprecated as of protocol version 2026-07-28 (SEP-2577) but stays
// functional for at least twelve months, and servers in use still sample (issue 16).

package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loopbot/loopbot/agent"
)

const (
	// maxSamplesPerCall bounds how often a server may consult the model during one tool
	// call, so that a looping server cannot spend the run's money unseen.
	maxSamplesPerCall = 8
	// maxSampleTokens caps the completion of one sampling request, whatever the server asks.
	maxSampleTokens = 4096
)

// MCPOption configures a Manager beyond its config file section.
type MCPOption func(*Manager)

// WithSamplingModel lets MCP servers ask loopbot's model for a completion (MCP sampling)
// while one of their tools is being called; cmd passes the summarizer model. Without it
// loopbot does not advertise sampling, and servers that need it say so themselves; a nil
// model leaves it off too.
func WithSamplingModel(model agent.Model) MCPOption {
	return func(m *Manager) { m.sampler = model }
}

// capabilities are the client capabilities loopbot advertises: sampling when it has a model
// for it, and elicitation in form mode, which it relays to the run's thread (mcp_elicit.go).
// Roots, which the SDK would advertise by default, are not offered.
func (m *Manager) capabilities() *mcp.ClientCapabilities {
	caps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}
	if m.sampler != nil {
		caps.Sampling = &mcp.SamplingCapabilities{}
	}
	return caps
}

// clientOptions wires the handlers for the requests a server may send to loopbot.
func (m *Manager) clientOptions(s *mcpServer) *mcp.ClientOptions {
	opts := &mcp.ClientOptions{
		Capabilities: m.capabilities(),
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return m.elicit(ctx, s, req)
		},
		// The notification arrives on the session's read loop, which the listing needs: it
		// runs on its own, for as long as the manager lives.
		ToolListChangedHandler: func(ctx context.Context, req *mcp.ToolListChangedRequest) {
			go m.relist(m.life, s, req.Session)
		},
	}
	if m.sampler != nil {
		opts.CreateMessageHandler = func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return m.sample(ctx, s, req)
		}
	}
	return opts
}

// mcpCall is one tool call in flight on a server. MCP does not say which call a server's
// sampling or elicitation request serves, so such a request is charged to the oldest call
// in flight on its server, which is exact whenever a server has one call at a time.
type mcpCall struct {
	runID, callID, tool string
	seq                 uint64
	// ctx is the call's own context, kept for the server's requests for input: the
	// question is asked on the call's behalf (agent.Ask) and ends with it.
	ctx context.Context

	mu           sync.Mutex
	samples      int
	usage        agent.Usage
	elicitations []string // how each request for input ended
}

// spent is what the server's sampling requests during the call used of the model.
func (c *mcpCall) spent() agent.Usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.usage
}

// note is what loopbot adds to the call's result about requests the server made during it,
// so that the model, and whoever reads the run, sees them.
func (c *mcpCall) note() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	if c.samples > 0 {
		parts = append(parts, fmt.Sprintf("[loopbot: the server consulted the model %d time(s) during this call: %d tokens, $%.4f, counted in the run's budget]",
			c.samples, c.usage.Total(), c.usage.Cost))
	}
	for _, e := range c.elicitations {
		parts = append(parts, "[loopbot: the server asked for input from the user during this call: "+e+"]")
	}
	return strings.Join(parts, "\n")
}

// begin records a call as in flight on s until the returned function is called.
func (s *mcpServer) begin(ctx context.Context, inv agent.Invocation, tool string) (*mcpCall, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	c := &mcpCall{runID: inv.RunID, callID: inv.CallID, tool: tool, seq: s.seq, ctx: ctx}
	s.calls[c] = struct{}{}
	return c, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.calls, c)
	}
}

// inFlight returns the oldest call in flight on s, and how many there are.
func (s *mcpServer) inFlight() (*mcpCall, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var oldest *mcpCall
	for c := range s.calls {
		if oldest == nil || c.seq < oldest.seq {
			oldest = c
		}
	}
	return oldest, len(s.calls)
}

// errNoCall refuses a server's request that comes while none of its tools is being called:
// a server consults the model or the user only on behalf of a call loopbot made.
var errNoCall = errors.New("loopbot serves sampling and elicitation only during a call of one of the server's tools")

// sample answers a server's sampling request with the sampling model. The server's
// messages are its own content: the model gets them with no tools, and its reply goes back
// to the server only. Every request is logged with the run it is charged to.
func (m *Manager) sample(ctx context.Context, s *mcpServer, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	log := m.log.With("mcp_server", s.cfg.Name)
	call, n := s.inFlight()
	if call == nil {
		log.Warn("mcp sampling refused: no call in flight")
		return nil, errNoCall
	}
	log = log.With("run_id", call.runID, "call_id", call.callID, "tool", call.tool)
	if n > 1 {
		log = log.With("calls_in_flight", n)
	}
	call.mu.Lock()
	if call.samples >= maxSamplesPerCall {
		call.mu.Unlock()
		log.Warn("mcp sampling refused: the call's limit is reached", "limit", maxSamplesPerCall)
		return nil, fmt.Errorf("loopbot allows at most %d sampling requests per tool call", maxSamplesPerCall)
	}
	call.samples++
	call.mu.Unlock()

	areq, err := samplingRequest(req.Params)
	if err != nil {
		log.Warn("mcp sampling refused", "err", err)
		return nil, err
	}
	reply, err := m.sampler.Complete(ctx, areq)
	call.mu.Lock()
	call.usage = call.usage.Add(reply.Usage)
	call.mu.Unlock()
	if err != nil {
		log.Warn("mcp sampling failed", "err", err)
		// The server gets a plain refusal: the model's own error may name endpoints.
		return nil, errors.New("loopbot's model could not answer")
	}
	log.Info("mcp sampling", "prompt_tokens", reply.Usage.PromptTokens, "completion_tokens", reply.Usage.CompletionTokens,
		"cost", reply.Usage.Cost, "max_tokens", areq.MaxTokens)
	stop := reply.FinishReason
	switch stop {
	case "stop", "":
		stop = "endTurn"
	case "length":
		stop = "maxTokens"
	}
	return &mcp.CreateMessageResult{
		Content:    &mcp.TextContent{Text: reply.Message.Content},
		Model:      "loopbot",
		Role:       "assistant",
		StopReason: stop,
	}, nil
}

// samplingRequest turns a server's sampling parameters into a model request without tools.
// Only text reaches the model; images and audio are named, not sent.
func samplingRequest(p *mcp.CreateMessageParams) (agent.Request, error) {
	if p == nil || len(p.Messages) == 0 {
		return agent.Request{}, errors.New("a sampling request needs at least one message")
	}
	var req agent.Request
	if p.SystemPrompt != "" {
		req.Messages = append(req.Messages, agent.Message{Role: agent.RoleSystem, Content: p.SystemPrompt})
	}
	for _, msg := range p.Messages {
		if msg == nil {
			return agent.Request{}, errors.New("a sampling message is null")
		}
		var role agent.Role
		switch msg.Role {
		case "user":
			role = agent.RoleUser
		case "assistant":
			role = agent.RoleAssistant
		default:
			return agent.Request{}, fmt.Errorf("unknown sampling message role %q", msg.Role)
		}
		var text string
		switch c := msg.Content.(type) {
		case *mcp.TextContent:
			text = c.Text
		case *mcp.ImageContent:
			text = "[image, " + c.MIMEType + ", not shown]"
		case *mcp.AudioContent:
			text = "[audio, " + c.MIMEType + ", not shown]"
		default:
			return agent.Request{}, fmt.Errorf("unsupported sampling content %T", msg.Content)
		}
		req.Messages = append(req.Messages, agent.Message{Role: role, Content: text})
	}
	req.MaxTokens = maxSampleTokens
	if p.MaxTokens > 0 && p.MaxTokens < maxSampleTokens {
		req.MaxTokens = int(p.MaxTokens)
	}
	return req, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// relist refreshes a server's tools when it says they changed; servers such as the
// reference "everything" server add tools only after the handshake.
func (m *Manager) relist(ctx context.Context, s *mcpServer, session *mcp.ClientSession) {
	ctx, cancel := context.WithTimeout(ctx, durationOr(m.cfg.StartTimeout, defaultStartTimeout))
	defer cancel()
	listed, err := listTools(ctx, session)
	if err != nil {
		m.log.Warn("mcp tools relist failed", "mcp_server", s.cfg.Name, "err", err)
		return
	}
	s.mu.Lock()
	for _, t := range listed {
		m.addTool(s, t)
	}
	s.mu.Unlock()
	if m.relisted != nil {
		m.relisted(s.cfg.Name)
	}
}
