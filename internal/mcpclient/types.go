package mcpclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Tool is one tool a server lists.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// Content is one item of a tool result or a sampling message: text, an image, audio, an
// embedded resource or a link to one. Data is base64, as on the wire.
type Content struct {
	Type     string            `json:"type"`
	Text     string            `json:"text,omitempty"`
	Data     string            `json:"data,omitempty"`
	MIMEType string            `json:"mimeType,omitempty"`
	URI      string            `json:"uri,omitempty"`
	Resource *ResourceContents `json:"resource,omitempty"`
}

// ResourceContents is the resource an embedded-resource item carries.
type ResourceContents struct {
	URI      string `json:"uri"`
	MIMEType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
}

// DataLen is the length in bytes of the base64 data an image or audio item carries.
func (c Content) DataLen() int {
	d := strings.TrimRight(c.Data, "=")
	return len(d) * 3 / 4
}

// CallToolResult is what a tools/call returns.
type CallToolResult struct {
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
}

// ElicitParams is a server's request for input from the user (elicitation/create).
type ElicitParams struct {
	Mode            string          `json:"mode,omitempty"`
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema,omitempty"`
	URL             string          `json:"url,omitempty"`
}

// ElicitResult answers an elicitation: accept (with content), decline or cancel.
type ElicitResult struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

// SamplingMessage is one message of a sampling request.
type SamplingMessage struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// UnmarshalJSON reads the message's content, which a server may send as one item or as a
// list (protocol 2025-11-25); a list must hold exactly one item.
func (m *SamplingMessage) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	m.Role = raw.Role
	c := raw.Content
	if t := strings.TrimSpace(string(c)); strings.HasPrefix(t, "[") {
		var list []Content
		if err := json.Unmarshal(c, &list); err != nil {
			return err
		}
		if len(list) != 1 {
			return fmt.Errorf("a sampling message with %d content items", len(list))
		}
		m.Content = list[0]
		return nil
	}
	if len(c) == 0 || string(c) == "null" {
		return errors.New("a sampling message has no content")
	}
	return json.Unmarshal(c, &m.Content)
}

// CreateMessageParams is a server's request for a completion (sampling/createMessage).
type CreateMessageParams struct {
	Messages     []*SamplingMessage `json:"messages"`
	SystemPrompt string             `json:"systemPrompt,omitempty"`
	MaxTokens    int64              `json:"maxTokens"`
}

// CreateMessageResult answers a sampling request.
type CreateMessageResult struct {
	Role       string  `json:"role"`
	Content    Content `json:"content"`
	Model      string  `json:"model"`
	StopReason string  `json:"stopReason,omitempty"`
}
