package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loopbot/loopbot/agent"
)

var _ agent.Tool = (*MCPTool)(nil)

const (
	defaultMinBackoff   = time.Second
	defaultMaxBackoff   = 5 * time.Minute
	defaultStartTimeout = 30 * time.Second
	defaultMCPTimeout   = 2 * time.Minute
	maxToolName         = 64
)

// Manager supervises the configured MCP servers: it connects to each, lists its tools, and
// restarts any that fails or dies, with backoff. A server's trouble is logged and never
// reaches beyond its own tools, which answer with an error while it is down.
type Manager struct {
	cfg     MCPConfig
	log     *slog.Logger
	servers []*mcpServer

	// sleep waits between restarts; tests replace it to control time.
	sleep func(ctx context.Context, d time.Duration) error
	// notify, when set, hears every server going up or down; tests wait on it.
	notify func(server string, up bool)
	// relisted, when set, hears every refresh of a server's tools after it said they changed.
	relisted func(server string)
	// sampler answers the servers' sampling requests; nil means sampling is not offered.
	sampler agent.Model

	life   context.Context // the servers' lifetime, from Start to Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewManager returns a manager for the enabled servers of cfg, which Validate has accepted.
func NewManager(cfg MCPConfig, logger *slog.Logger, opts ...MCPOption) *Manager {
	if logger == nil {
		logger = slog.Default()
	}
	m := &Manager{cfg: cfg, log: logger, sleep: sleepCtx, life: context.Background()}
	for _, o := range opts {
		o(m)
	}
	for _, sc := range cfg.Servers {
		if sc.Disabled {
			continue
		}
		m.servers = append(m.servers, &mcpServer{
			cfg:   sc,
			tools: map[string]*MCPTool{},
			calls: map[*mcpCall]struct{}{},
			ready: make(chan struct{}),
			poke:  make(chan *mcp.ClientSession, 1),
		})
	}
	return m
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Start connects to every server and returns once each has connected or failed its first
// attempt, so that the tools of the servers that are up can be offered right away. Servers
// that failed keep being retried in the background until Close. The servers live until
// Close, not until ctx ends; ctx bounds only the wait for the first attempts.
func (m *Manager) Start(ctx context.Context) {
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.life, m.cancel = life, cancel
	for _, s := range m.servers {
		m.wg.Go(func() { m.supervise(life, s) })
	}
	for _, s := range m.servers {
		select {
		case <-s.ready:
		case <-ctx.Done():
			return
		}
	}
}

// Close stops every server and waits for their supervisors to end.
func (m *Manager) Close() error {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
	return nil
}

// Tools returns the tools of every server known so far, in a stable order. A server that was
// never up has none yet; a server that went down keeps its tools, which report it down.
func (m *Manager) Tools() []agent.Tool {
	var out []agent.Tool
	for _, s := range m.servers {
		s.mu.Lock()
		names := make([]string, 0, len(s.tools))
		for name := range s.tools {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			out = append(out, s.tools[name])
		}
		s.mu.Unlock()
	}
	return out
}

// ServerStatus says how one MCP server is doing.
type ServerStatus struct {
	Name  string
	Up    bool
	Tools int
	// Err is why the server is down, if it is.
	Err string
}

// Status reports every enabled server.
func (m *Manager) Status() []ServerStatus {
	var out []ServerStatus
	for _, s := range m.servers {
		s.mu.Lock()
		st := ServerStatus{Name: s.cfg.Name, Up: s.session != nil, Tools: len(s.tools)}
		if s.lastErr != nil {
			st.Err = s.lastErr.Error()
		}
		s.mu.Unlock()
		out = append(out, st)
	}
	return out
}

func (m *Manager) backoff(failures int) time.Duration {
	d := durationOr(m.cfg.MinBackoff, defaultMinBackoff)
	limit := durationOr(m.cfg.MaxBackoff, defaultMaxBackoff)
	for range failures {
		d *= 2
		if d >= limit {
			return limit
		}
	}
	return min(d, limit)
}

// supervise keeps one server connected until ctx ends.
func (m *Manager) supervise(ctx context.Context, s *mcpServer) {
	log := m.log.With("mcp_server", s.cfg.Name)
	failures := 0
	first := true
	for {
		err := m.connect(ctx, s)
		if err != nil {
			// Recorded before ready is closed, so Start's callers (loopbot check) see why
			// a server that never came up is down.
			s.setDown(err)
		}
		if first {
			close(s.ready)
			first = false
		}
		if err == nil {
			failures = 0
			log.Info("mcp server up")
			m.changed(s, true)
			err = s.wait(ctx)
			s.setDown(err)
		}
		if ctx.Err() != nil {
			return
		}
		m.changed(s, false)
		d := m.backoff(failures)
		failures++
		log.Warn("mcp server down; restarting after backoff", "err", err, "backoff", d)
		if m.sleep(ctx, d) != nil {
			return
		}
	}
}

func (m *Manager) changed(s *mcpServer, up bool) {
	if m.notify != nil {
		m.notify(s.cfg.Name, up)
	}
}

// connect starts or reaches the server, lists its tools and makes the session current.
func (m *Manager) connect(ctx context.Context, s *mcpServer) error {
	transport, err := m.transport(s.cfg)
	if err != nil {
		return err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "loopbot", Version: "1"}, m.clientOptions(s))
	cctx, cancel := context.WithTimeout(ctx, durationOr(m.cfg.StartTimeout, defaultStartTimeout))
	defer cancel()
	session, err := client.Connect(cctx, transport, nil)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	listed, err := listTools(cctx, session)
	if err != nil {
		session.Close()
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range listed {
		m.addTool(s, t)
	}
	s.session, s.lastErr = session, nil
	return nil
}

// listTools lists every tool the server offers, page after page.
func listTools(ctx context.Context, session *mcp.ClientSession) ([]*mcp.Tool, error) {
	var listed []*mcp.Tool
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		listed = append(listed, t)
	}
	return listed, nil
}

// transport builds the way to reach a server. A stdio server gets a minimal environment
// plus its configured variables, never the bot's own, which holds its secrets.
func (m *Manager) transport(sc MCPServerConfig) (mcp.Transport, error) {
	if sc.Command != "" {
		cmd := exec.Command(sc.Command, sc.Args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8"}
		for k, v := range sc.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = &logWriter{log: m.log.With("mcp_server", sc.Name)}
		return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil
	}
	client := &http.Client{Transport: &headerTransport{headers: sc.Headers, base: newMCPHTTPTransport()}}
	return &mcp.StreamableClientTransport{Endpoint: sc.URL, HTTPClient: client, MaxRetries: 1}, nil
}

// addTool registers or refreshes one listed tool; s.mu is held.
func (m *Manager) addTool(s *mcpServer, t *mcp.Tool) {
	log := m.log.With("mcp_server", s.cfg.Name, "tool", t.Name)
	if len(s.cfg.Allow) > 0 && !slices.Contains(s.cfg.Allow, t.Name) || slices.Contains(s.cfg.Deny, t.Name) {
		return
	}
	name := mcpToolName(s.cfg.Name, t.Name)
	params, err := toolSchema(t.InputSchema)
	if err != nil {
		log.Warn("mcp tool skipped: its input schema is unusable", "err", err)
		return
	}
	if existing, ok := s.tools[name]; ok {
		if existing.remote != t.Name {
			log.Warn("mcp tool skipped: its name clashes with another tool of the server", "name", name)
			return
		}
		existing.setSpec(t.Description, params)
		return
	}
	risk := agent.RiskConfirm
	if s.cfg.Risk != 0 {
		risk = s.cfg.Risk
	}
	if r, ok := s.cfg.ToolRisk[t.Name]; ok {
		risk = r
	}
	tool := &MCPTool{srv: s, name: name, remote: t.Name, risk: risk, timeout: durationOr(s.cfg.Timeout, defaultMCPTimeout)}
	tool.setSpec(t.Description, params)
	s.tools[name] = tool
}

// mcpToolName is the name the model sees: <server>__<tool>, limited to the characters and
// length that OpenAI accepts for function names.
func mcpToolName(server, tool string) string {
	var b strings.Builder
	b.WriteString(server)
	b.WriteString("__")
	for _, r := range tool {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > maxToolName {
		s = s[:maxToolName]
	}
	return s
}

// toolSchema turns a server's input schema into the parameters the model sees, checking
// that it compiles, since one bad schema must not stop the agent from starting.
func toolSchema(in any) (json.RawMessage, error) {
	if in == nil {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	if _, err := s.Resolve(nil); err != nil {
		return nil, err
	}
	return raw, nil
}

// mcpServer is one supervised server and the tools it has offered.
type mcpServer struct {
	cfg   MCPServerConfig
	ready chan struct{}           // closed after the first connection attempt
	poke  chan *mcp.ClientSession // a call saw the connection of this session fail

	mu      sync.Mutex
	session *mcp.ClientSession // nil while down
	lastErr error
	tools   map[string]*MCPTool
	calls   map[*mcpCall]struct{} // the tool calls in flight
	seq     uint64                // numbers the calls, oldest first
}

func (s *mcpServer) current() (*mcp.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == nil {
		if s.lastErr == nil {
			return nil, errors.New("not connected yet")
		}
		return nil, s.lastErr
	}
	return s.session, nil
}

func (s *mcpServer) setDown(err error) {
	if err == nil {
		err = errors.New("connection ended")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.session, s.lastErr = nil, err
}

// wait blocks until the session ends, a call reports the connection broken, or ctx ends;
// the session is closed on the way out.
func (s *mcpServer) wait(ctx context.Context) error {
	session, _ := s.current()
	done := make(chan error, 1)
	go func() { done <- session.Wait() }()
	var err error
	for err == nil {
		select {
		case err = <-done:
			if err == nil {
				err = errors.New("the server closed the connection")
			}
			return err
		case broken := <-s.poke:
			// A call on an earlier session may report late; only this one's matter.
			if broken == session {
				err = errors.New("a call found the connection broken")
			}
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	session.Close()
	<-done
	return err
}

// MCPTool is one tool of an MCP server, offered to the model as <server>__<tool>.
type MCPTool struct {
	srv     *mcpServer
	name    string
	remote  string
	risk    agent.Risk
	timeout time.Duration

	mu     sync.Mutex
	desc   string
	params json.RawMessage
}

func (t *MCPTool) setSpec(desc string, params json.RawMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.desc, t.params = desc, params
}

// Info describes the tool with the server's own description and schema. MCP tools are
// neither read-only nor idempotent as far as the loop knows: a server's hints about that are
// its own claims.
func (t *MCPTool) Info() agent.ToolInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	desc := fmt.Sprintf("[MCP server %s, tool %s] %s", t.srv.cfg.Name, t.remote, t.desc)
	return agent.ToolInfo{
		Spec:      agent.ToolSpec{Name: t.name, Description: strings.TrimSpace(desc), Parameters: t.params},
		Timeout:   t.timeout,
		Untrusted: true, // a server's results and errors are outside content, trusted server or not
	}
}

// Assess gives every call the level configured for the tool, or for its server, or confirm.
func (t *MCPTool) Assess(json.RawMessage) agent.Assessment {
	cfg := t.srv.cfg
	as := agent.Assessment{Risk: t.risk, Reason: fmt.Sprintf("calls %s on MCP server %s", t.remote, cfg.Name)}
	// For the data-flow guard: a server not marked trusted may pass on anything it read, and
	// a tool not marked read-only may send its arguments anywhere.
	if !cfg.Trusted {
		as.Reads = "MCP server " + cfg.Name
	}
	if !slices.Contains(cfg.ReadOnlyTools, t.remote) {
		as.Sends, as.Carries = "MCP server "+cfg.Name, true
	}
	return as
}

// Call calls the tool on its server. What the server returns is marked as untrusted
// content, since a server may pass on anything it read.
func (t *MCPTool) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	session, down := t.srv.current()
	if session == nil {
		return "", fmt.Errorf("MCP server %s is down (%v); its tools are unavailable until it restarts", t.srv.cfg.Name, down)
	}
	call, done := t.srv.begin(ctx, inv, t.remote)
	params := &mcp.CallToolParams{Name: t.remote, Arguments: inv.Args}
	if key := idempotencyKey(inv); key != "" {
		params.Meta = mcp.Meta{metaIdempotencyKey: key}
	}
	res, err := session.CallTool(ctx, params)
	done()
	// What the server's sampling spent counts against the run's budget, however the call
	// ended.
	agent.ReportUsage(ctx, call.spent())
	if err != nil {
		if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing) {
			select {
			case t.srv.poke <- session:
			default:
			}
		}
		return "", fmt.Errorf("MCP server %s, tool %s: %w", t.srv.cfg.Name, t.remote, err)
	}
	text := resultText(res)
	// Loopbot's own words about what the server asked of it come first, before the server's
	// content, so that a shortened transcript (runs show) still shows them.
	note := call.note()
	if note != "" {
		note += "\n"
	}
	if res.IsError {
		return "", fmt.Errorf("%sMCP tool %s failed: %s", note, t.name, text)
	}
	return note + wrapUntrusted("mcp://"+t.srv.cfg.Name+"/"+t.remote, "MCP tool result", text), nil
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image, %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio, %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else if c.Resource != nil {
				parts = append(parts, "[resource "+c.Resource.URI+"]")
			}
		case *mcp.ResourceLink:
			parts = append(parts, "[resource link "+c.URI+"]")
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}

// headerTransport adds the configured headers (such as an API key) to every request to an
// HTTP server.
type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (h *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range h.headers {
			req.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(req)
}

// logWriter logs a stdio server's stderr, line by line, at debug level.
type logWriter struct {
	log  *slog.Logger
	mu   sync.Mutex
	part []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, p...)
	for {
		line, rest, ok := bytes.Cut(w.part, []byte("\n"))
		if !ok {
			break
		}
		w.log.Debug("mcp server stderr", "line", string(line))
		w.part = rest
	}
	if len(w.part) > 4096 {
		// A server that never ends its line still gets heard, in pieces.
		w.log.Debug("mcp server stderr", "line", string(w.part))
		w.part = nil
	}
	return len(p), nil
}
