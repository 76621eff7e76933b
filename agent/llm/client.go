package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"
	openai "github.com/sashabaranov/go-openai"

	"github.com/loopbot/loopbot/agent"
)

var _ agent.Model = (*Client)(nil)

// Client is an agent.Model over an OpenAI-compatible endpoint. It is safe for concurrent
// use.
type Client struct {
	api *openai.Client
	// hc and endpoint send a completion that is not streamed (request.go); hc is the
	// client go-openai uses too, with the header tap.
	hc         *http.Client
	endpoint   endpoint
	model      string
	stream     bool
	maxRetries int
	timeout    time.Duration
	price      Price
	apiKey     string
	// temperature is sent when set.
	temperature *float32
	// completionTokens sends the token cap as max_completion_tokens rather than max_tokens.
	completionTokens bool
	// tools are the latest tool sets requests offered, translated and encoded (toolset.go).
	tools toolSets

	sleep func(ctx context.Context, d time.Duration) error
	now   func() time.Time
	// jitter picks the actual wait in [d/2, d] for a backoff of d.
	jitter func(d time.Duration) time.Duration
}

// Option configures a Client.
type Option struct{ apply func(*settings) }

// settings are what the options set.
type settings struct {
	httpClient *http.Client
	sleep      func(ctx context.Context, d time.Duration) error
	now        func() time.Time
}

// WithHTTPClient sets the HTTP client; its transport, or newTransport's when it has
// none, carries the requests. The client is copied, not modified.
func WithHTTPClient(hc *http.Client) Option {
	return Option{func(s *settings) { s.httpClient = hc }}
}

// WithSleep sets how the client waits between attempts. sleep must return early with an
// error when ctx ends. Tests use it to record the waits instead of waiting.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return Option{func(s *settings) { s.sleep = sleep }}
}

// WithClock sets the clock that Retry-After dates are measured against.
func WithClock(now func() time.Time) Option {
	return Option{func(s *settings) { s.now = now }}
}

// New builds a Client for cfg.
func New(cfg Config, opts ...Option) (*Client, error) {
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("new llm client: %w", err)
	}
	c := &Client{
		model:       cfg.Model,
		stream:      cfg.Stream,
		maxRetries:  cfg.MaxRetries,
		timeout:     time.Duration(cfg.Timeout),
		price:       cfg.Price,
		apiKey:      cfg.APIKey,
		temperature: cfg.Temperature,
		jitter:      halfJitter,
	}
	switch {
	case c.maxRetries == 0:
		c.maxRetries = DefaultMaxRetries
	case c.maxRetries < 0:
		c.maxRetries = 0
	}
	o := settings{sleep: sleepCtx, now: time.Now}
	for _, opt := range opts {
		if opt.apply != nil {
			opt.apply(&o)
		}
	}
	c.sleep, c.now = o.sleep, o.now

	var oc openai.ClientConfig
	if cfg.Azure {
		oc = openai.DefaultAzureConfig(cfg.APIKey, cfg.BaseURL)
		if cfg.APIVersion != "" {
			oc.APIVersion = cfg.APIVersion
		}
		// The configured model is the deployment's name; go-openai's default mapper would
		// strip characters from it.
		oc.AzureModelMapperFunc = func(model string) string { return model }
	} else {
		oc = openai.DefaultConfig(cfg.APIKey)
		if cfg.BaseURL != "" {
			oc.BaseURL = cfg.BaseURL
		}
	}
	oc.EmptyMessagesLimit = maxQuietStreamLines
	hc := &http.Client{}
	if o.httpClient != nil {
		copied := *o.httpClient
		hc = &copied
	}
	base := hc.Transport
	if base == nil {
		base = newTransport()
	}
	hc.Transport = &headerTap{base: base}
	oc.HTTPClient = hc
	c.api = openai.NewClientWithConfig(oc)
	c.hc, c.endpoint = hc, newEndpoint(oc, cfg.Model, cfg.APIKey)
	c.completionTokens = officialOpenAI(cfg)
	return c, nil
}

// maxQuietStreamLines is how many lines that are not data (comments, blank lines) a stream
// may send between two events. OpenRouter sends a keep-alive comment and a blank line again
// and again while the model works before its first token (a recorded stream has 17 of them);
// go-openai's default of 300 lines would end a long wait with an error. The bound stays, as
// go-openai keeps those lines in memory until the next event.
const maxQuietStreamLines = 20000

// maxIdleConnsPerHost is how many idle connections to the model endpoint are kept for
// reuse. Every running run waits on a call to the same endpoint, so as many calls as runs
// may be under way at once; with the standard library's default of two, all but two of
// their connections would be closed as each answer arrived, and the next step of those
// runs would dial again and repeat the TLS handshake. Idle connections are closed after
// IdleConnTimeout all the same, so a burst leaves none behind for long.
const maxIdleConnsPerHost = 1024

// connBufferSize is the size of the read and of the write buffer of each HTTP/1.1
// connection to the endpoint, where the standard library's default is 4 KB each. A bot with a
// thousand runs has a thousand connections open to a local model server (HTTPS endpoints
// speak HTTP/2 over one), and their buffers were 8 MB of the heap, which the GC's goal
// doubles: the 1000-run makespan scenario's peak heap fell by 10-14 MB. A bigger request
// costs one more write at most: once the buffer holding the headers is flushed, the body
// goes straight to the socket, as a reply longer than the buffer is read straight from it.
const connBufferSize = 1 << 10

// newTransport is the standard library's default transport, keeping enough idle
// connections for many runs at once.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0 // no limit across hosts; the per-host one holds
	t.MaxIdleConnsPerHost = maxIdleConnsPerHost
	t.ReadBufferSize, t.WriteBufferSize = connBufferSize, connBufferSize
	return t
}

// officialOpenAI reports whether cfg points at OpenAI's or Azure's own service. Their
// reasoning models refuse max_tokens and take max_completion_tokens, which many other
// OpenAI-compatible servers do not know yet.
func officialOpenAI(cfg Config) bool {
	if cfg.Azure || cfg.BaseURL == "" {
		return true
	}
	u, err := url.Parse(cfg.BaseURL)
	return err == nil && u.Hostname() == "api.openai.com"
}

// Complete consults the model once, retrying failures that are worth another attempt.
func (c *Client) Complete(ctx context.Context, req agent.Request) (agent.Reply, error) {
	creq, err := c.request(req)
	if err != nil {
		return agent.Reply{}, fmt.Errorf("complete: %w", err)
	}
	text := &textRelay{onText: req.OnText}
	for attempt := 1; ; attempt++ {
		text.restart()
		reply, err := c.attempt(ctx, creq, text)
		if err == nil {
			return reply, nil
		}
		if ctx.Err() != nil {
			return agent.Reply{}, fmt.Errorf("complete: %w", c.redact(err))
		}
		f := c.classify(err)
		wait, retry := c.nextWait(ctx, f, attempt)
		if !retry {
			return agent.Reply{}, c.final(f, attempt)
		}
		if err := c.sleep(ctx, wait); err != nil {
			return agent.Reply{}, fmt.Errorf("complete: wait %s to retry after %v: %w", wait, f.err, err)
		}
	}
}

// attempt makes one request. The header tap notes the response's status and retry headers
// in the attempt's record.
func (c *Client) attempt(ctx context.Context, creq openai.ChatCompletionRequest, text *textRelay) (agent.Reply, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.timeout, attemptTimeout(c.timeout))
		defer cancel()
	}
	rec := &responseRecord{keepBody: !c.stream}
	ctx = context.WithValue(ctx, responseKey{}, rec)
	var (
		reply agent.Reply
		err   error
	)
	if c.stream {
		reply, err = c.completeStream(ctx, creq, text)
	} else {
		reply, err = c.completeOnce(ctx, creq, rec)
	}
	if err == nil {
		return reply, nil
	}
	if cause := context.Cause(ctx); errors.Is(cause, errAttemptTimeout) && !errors.Is(err, errAttemptTimeout) {
		// Some errors of a cancelled request do not carry the context's cause.
		err = fmt.Errorf("%w: %w", cause, err)
	}
	return agent.Reply{}, &attemptError{err: err, resp: rec.get()}
}

// completeOnce asks for the reply as one JSON body, sent by post (request.go); the reply is
// decoded from the body the header tap kept, with this package's types, which accept
// tool-call arguments sent as an object (go-openai's refuse them) and see an error object
// in a 200 body.
func (c *Client) completeOnce(ctx context.Context, creq openai.ChatCompletionRequest, rec *responseRecord) (agent.Reply, error) {
	// What go-openai checks before it sends: the parameters reasoning models refuse.
	if err := openai.NewReasoningValidator().Validate(creq); err != nil {
		return agent.Reply{}, err
	}
	reqBody, err := encodeRequest(creq, c.tools.bodyFor(creq.Tools))
	if err != nil {
		return agent.Reply{}, err
	}
	if err := c.post(ctx, reqBody); err != nil {
		return agent.Reply{}, err
	}
	body, ok := rec.keptBody()
	if !ok {
		return agent.Reply{}, fmt.Errorf("the reply is longer than %d bytes", maxKeptBody)
	}
	var resp completion
	if err := jsonv1.Unmarshal(body, &resp); err != nil {
		return agent.Reply{}, fmt.Errorf("decode reply: %w", err)
	}
	if resp.Error != nil {
		return agent.Reply{}, resp.Error.err()
	}
	if len(resp.Choices) == 0 {
		return agent.Reply{}, errNoChoices
	}
	ch := resp.Choices[0]
	msg := agent.Message{Role: agent.RoleAssistant, Content: ch.Message.Content}
	if msg.Content == "" {
		// A refusal is the model's answer in words; the run should show it.
		msg.Content = ch.Message.Refusal
	}
	for _, tc := range ch.Message.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, agent.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: string(tc.Function.Arguments)})
	}
	return agent.Reply{Message: msg, Usage: c.usage(resp.Usage), FinishReason: ch.FinishReason}, nil
}

// completeStream asks for the reply as a stream of chunks, passing the text of each on to
// text as it comes.
func (c *Client) completeStream(ctx context.Context, creq openai.ChatCompletionRequest, text *textRelay) (agent.Reply, error) {
	creq.Stream = true
	creq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	stream, err := c.api.CreateChatCompletionStream(ctx, creq)
	if err != nil {
		return agent.Reply{}, err
	}
	defer stream.Close()
	var acc accumulator
	for {
		// The raw data line, decoded into this package's chunk type: go-openai's would
		// refuse arguments sent as an object and drop an error chunk's error.
		line, err := stream.RecvRaw()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return agent.Reply{}, fmt.Errorf("read stream: %w", err)
		}
		var ck chunk
		if err := jsonv1.Unmarshal(line, &ck); err != nil {
			return agent.Reply{}, fmt.Errorf("read stream: %w", err)
		}
		acc.add(ck)
		text.send(ck)
		if acc.err != nil {
			break
		}
	}
	reply, err := acc.reply()
	if err != nil {
		return agent.Reply{}, err
	}
	reply.Usage = c.usage(acc.usage)
	return reply, nil
}

// usage converts the endpoint's usage and prices it. An endpoint that reports none still
// counts one call.
func (c *Client) usage(u *openai.Usage) agent.Usage {
	out := agent.Usage{Calls: 1}
	if u != nil {
		out.PromptTokens = u.PromptTokens
		out.CompletionTokens = u.CompletionTokens
		if u.PromptTokensDetails != nil {
			out.CachedTokens = u.PromptTokensDetails.CachedTokens
		}
	}
	out.Cost = c.price.Cost(out)
	return out
}

// defaultParameters is the schema sent for a tool that declares none: some servers refuse a
// function without parameters.
var defaultParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// request translates an agent.Request into go-openai's. Its tools are a kept set's, which
// the request must not change.
func (c *Client) request(req agent.Request) (openai.ChatCompletionRequest, error) {
	creq := openai.ChatCompletionRequest{Model: c.model, Messages: make([]openai.ChatCompletionMessage, 0, len(req.Messages))}
	for _, m := range req.Messages {
		om := openai.ChatCompletionMessage{Role: string(m.Role), Content: m.Content}
		switch m.Role {
		case agent.RoleAssistant:
			if len(m.ToolCalls) > 0 {
				om.ToolCalls = make([]openai.ToolCall, 0, len(m.ToolCalls))
			}
			for _, tc := range m.ToolCalls {
				om.ToolCalls = append(om.ToolCalls, openai.ToolCall{
					ID:       tc.ID,
					Type:     openai.ToolTypeFunction,
					Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments},
				})
			}
		case agent.RoleTool:
			// The tool's name stays out: OpenAI links a result to its call by ID alone.
			om.ToolCallID = m.ToolCallID
		}
		creq.Messages = append(creq.Messages, om)
	}
	if len(req.Tools) > 0 {
		set, err := c.tools.get(req.Tools)
		if err != nil {
			return creq, err
		}
		creq.Tools = set.tools
	}
	if req.JSON {
		creq.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	}
	if req.MaxTokens > 0 {
		if c.completionTokens {
			creq.MaxCompletionTokens = req.MaxTokens
		} else {
			//lint:ignore SA1019 other servers than OpenAI's still widely know only max_tokens.
			creq.MaxTokens = req.MaxTokens
		}
	}
	if c.temperature != nil {
		creq.Temperature = *c.temperature
		if creq.Temperature == 0 {
			// go-openai omits a zero temperature; the smallest positive float is how its
			// documentation says to ask for zero.
			creq.Temperature = math.SmallestNonzeroFloat32
		}
	}
	return creq, nil
}
