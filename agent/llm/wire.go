package llm

import (
	"bytes"
	"encoding/json"
	"fmt"

	jsonv1 "github.com/go-json-experiment/json/v1"
	openai "github.com/sashabaranov/go-openai"
)

// The replies are decoded into this package's own wire types rather than go-openai's, so
// that what providers really send is understood: tool-call arguments as a JSON object
// instead of a string, and an error inside a successful answer. Only the fields the client
// uses are declared; the rest (reasoning deltas, Azure's content filter results, logprobs)
// is skipped.

// completion is a chat completion sent as one JSON body.
type completion struct {
	Choices []struct {
		Index        int         `json:"index"`
		Message      wireMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
	} `json:"choices"`
	Usage *openai.Usage `json:"usage"`
	Error *wireError    `json:"error"`
}

// wireMessage is the assistant's message of a reply, or the part of it a stream's chunk
// adds: the two have the same fields.
type wireMessage struct {
	Content   string     `json:"content"`
	Refusal   string     `json:"refusal"`
	ToolCalls []toolCall `json:"tool_calls"`
}

// chunk is one chunk of a streamed chat completion.
type chunk struct {
	Choices []struct {
		Index        int         `json:"index"`
		Delta        wireMessage `json:"delta"`
		FinishReason string      `json:"finish_reason"`
	} `json:"choices"`
	Usage *openai.Usage `json:"usage"`
	Error *wireError    `json:"error"`
}

// toolCall is a tool call of a reply, or a delta of one in a stream, where Index says which
// call it continues.
type toolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string    `json:"name"`
		Arguments arguments `json:"arguments"`
	} `json:"function"`
}

// arguments are a tool call's arguments as the text the agent expects. The API sends them as
// a JSON string; some proxies send the JSON object itself, which is kept as its compact JSON
// text. Any other value is kept as its JSON text too, for the loop to judge.
type arguments string

func (a *arguments) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		*a = ""
	case b[0] == '"':
		var s string
		if err := jsonv1.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("tool call arguments: %w", err)
		}
		*a = arguments(s)
	default:
		var buf bytes.Buffer
		if err := json.Compact(&buf, b); err != nil {
			return fmt.Errorf("tool call arguments: %w", err)
		}
		*a = arguments(buf.String())
	}
	return nil
}

// wireError is an error object in the body of a successful answer. OpenRouter sends one in
// a chunk with finish_reason "error" when the provider fails in the middle of a stream, and
// some servers answer 200 with nothing but an error.
type wireError struct {
	// Code is a number (OpenRouter: an HTTP status) or a string (OpenAI: "server_error").
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
	Type    string          `json:"type"`
}

func (e *wireError) err() *ProviderError {
	pe := &ProviderError{Message: e.Message, Code: e.Type}
	code := bytes.TrimSpace(e.Code)
	if len(code) > 0 && string(code) != "null" {
		var s string
		if json.Unmarshal(code, &s) == nil {
			pe.Code = s
		} else {
			pe.Code = string(code)
		}
	}
	return pe
}
