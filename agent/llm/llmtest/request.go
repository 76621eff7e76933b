package llmtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Request is one chat completions request as the server decoded it.
type Request struct {
	// Path and Query are the URL's, so a test can check where an Azure client posts.
	Path  string
	Query string
	// Header is a copy of the request's headers.
	Header http.Header

	Model    string
	Messages []Message
	Tools    []Tool
	Stream   bool
	// IncludeUsage is stream_options.include_usage.
	IncludeUsage bool
	// ResponseFormat is response_format.type, such as "json_object"; empty when not asked.
	ResponseFormat string
	// MaxTokens is max_tokens and MaxCompletionTokens max_completion_tokens.
	MaxTokens           int
	MaxCompletionTokens int
	Temperature         *float64

	// Body is the raw request body.
	Body []byte
}

// Message is one message of a request.
type Message struct {
	Role string
	// Content is the text of the message; the texts of a multi-part content are joined.
	Content    string
	ToolCalls  []ToolCall
	ToolCallID string
	Name       string
}

// ToolCall is a tool call, in a reply the server sends or in an assistant message it
// receives.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Tool is a function tool offered in a request.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// Chars counts the characters of the request's message contents and tool-call arguments,
// the base of the server's token estimate.
func (r Request) Chars() int {
	n := 0
	for _, m := range r.Messages {
		n += utf8.RuneCountInString(m.Content)
		for _, c := range m.ToolCalls {
			n += utf8.RuneCountInString(c.Arguments)
		}
	}
	return n
}

// LastMessage returns the last message of the request, or a zero Message when there is none.
func (r Request) LastMessage() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

type wireRequest struct {
	Model    string        `json:"model"`
	Messages []wireMessage `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	MaxTokens           int      `json:"max_tokens"`
	MaxCompletionTokens int      `json:"max_completion_tokens"`
	Temperature         *float64 `json:"temperature"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []wireToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
}

type wireToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// decodeRequest reads a chat completions request body. It accepts what OpenAI accepts for
// the fields it records: a content may be a string, null, or an array of parts.
func decodeRequest(body []byte) (Request, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return Request{}, fmt.Errorf("decode request: %w", err)
	}
	r := Request{
		Model:               w.Model,
		Stream:              w.Stream,
		IncludeUsage:        w.StreamOptions != nil && w.StreamOptions.IncludeUsage,
		MaxTokens:           w.MaxTokens,
		MaxCompletionTokens: w.MaxCompletionTokens,
		Temperature:         w.Temperature,
		Body:                body,
	}
	if w.ResponseFormat != nil {
		r.ResponseFormat = w.ResponseFormat.Type
	}
	for i, wm := range w.Messages {
		content, err := decodeContent(wm.Content)
		if err != nil {
			return Request{}, fmt.Errorf("decode request: message %d: %w", i, err)
		}
		m := Message{Role: wm.Role, Content: content, ToolCallID: wm.ToolCallID, Name: wm.Name}
		for _, c := range wm.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		r.Messages = append(r.Messages, m)
	}
	for _, t := range w.Tools {
		r.Tools = append(r.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return r, nil
}

// decodeContent reads a message content: a string, null, or an array of parts whose texts
// are joined.
func decodeContent(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("content is neither a string nor an array of parts")
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}
