package agent

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Role says who wrote a Message.
type Role string

// The roles of a conversation with the model.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of the conversation with the model. It is loopbot's own type, not a
// client library's, so that a saved run never depends on a library's wire format.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID links a tool message to the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Name is the tool's name on a tool message.
	Name string `json:"name,omitempty"`
}

// ToolCall is one call the model asked for, exactly as the model wrote it. Arguments stay the
// raw text the model sent: it may not even be JSON, and the loop reports that back to the model.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolSpec is what the model is told about a tool.
type ToolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Parameters is a JSON Schema for the arguments object.
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// Usage counts the tokens and cost of model calls.
type Usage struct {
	PromptTokens     int     `json:"prompt_tokens,omitempty"`
	CompletionTokens int     `json:"completion_tokens,omitempty"`
	CachedTokens     int     `json:"cached_tokens,omitempty"`
	Cost             float64 `json:"cost,omitempty"` // US dollars
	Calls            int     `json:"calls,omitempty"`
}

// Total is prompt plus completion tokens.
func (u Usage) Total() int { return u.PromptTokens + u.CompletionTokens }

// Add returns the sum of two usages.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + v.PromptTokens,
		CompletionTokens: u.CompletionTokens + v.CompletionTokens,
		CachedTokens:     u.CachedTokens + v.CachedTokens,
		Cost:             u.Cost + v.Cost,
		Calls:            u.Calls + v.Calls,
	}
}

// Request is one consultation of a model.
type Request struct {
	Messages []Message
	// Tools offered to the model; none means the model must answer in text.
	Tools []ToolSpec
	// MaxTokens caps the completion; zero leaves it to the model.
	MaxTokens int
	// JSON asks for a JSON object reply where the endpoint supports it.
	JSON bool
	// OnText, if set, is called with the reply's text as it arrives, by a Model that
	// streams (stream.go), in the goroutine of Complete and before it returns; a Model
	// that does not stream never calls it.
	OnText func(TextDelta) `json:"-"`
}

// Reply is a model's answer to a Request.
type Reply struct {
	Message      Message
	Usage        Usage
	FinishReason string
}

// Model is an LLM the loop consults. Implementations retry transient failures themselves and
// report usage, including cost, for every call.
type Model interface {
	Complete(ctx context.Context, req Request) (Reply, error)
}

// RateLimitError is returned by a Model whose endpoint kept refusing with a rate limit after
// its own retries; RetryAfter is what the endpoint last asked for.
type RateLimitError struct {
	RetryAfter time.Duration
	Err        error
}

func (e *RateLimitError) Error() string { return "model rate limited: " + e.Err.Error() }
func (e *RateLimitError) Unwrap() error { return e.Err }

// ErrCancelled is the cause to cancel a run's context with when a person cancels the run, as
// opposed to the process shutting down (which leaves the run resumable).
var ErrCancelled = errors.New("run cancelled")

// ErrCheckpoint is wrapped by the error Run returns when the Checkpoint hook failed: the run
// stopped without acting further, and its last saved state is where it can resume.
var ErrCheckpoint = errors.New("checkpoint failed")
