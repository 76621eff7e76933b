package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// Sending a completion that is not streamed.
//
// go-openai encodes every message of a request through its own MarshalJSON, whose output
// encoding/json then checks and compacts again, and decodes every reply into its types,
// which the client then decodes again into its own (completeOnce). With a thousand runs
// stepping at once that was a sixth of the bot's CPU. So a completion that is not streamed
// is sent here: the body is go-openai's request with the same fields, encoded once from
// plain structs (wireRequest), to the URL and with the headers go-openai would use, and a
// failed status becomes the error go-openai would return (apiError), which classify reads.
// Streams still go through go-openai, whose reader parses the events.

// wireRequest is the body of a chat completion request: the fields of go-openai's
// ChatCompletionRequest that request sets, with the same names and omissions, but for the
// tools, which encodeRequest adds as they were encoded once (toolset.go).
type wireRequest struct {
	Model               string                               `json:"model"`
	Messages            []wireRequestMessage                 `json:"messages"`
	MaxTokens           int                                  `json:"max_tokens,omitempty"`
	MaxCompletionTokens int                                  `json:"max_completion_tokens,omitempty"`
	Temperature         float32                              `json:"temperature,omitempty"`
	Stream              bool                                 `json:"stream"`
	ResponseFormat      *openai.ChatCompletionResponseFormat `json:"response_format,omitempty"`
}

// wireRequestMessage is go-openai's ChatCompletionMessage as its MarshalJSON writes one
// without multi-part content.
type wireRequestMessage struct {
	Role       string            `json:"role"`
	Content    string            `json:"content,omitempty"`
	ToolCalls  []openai.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
}

// wireTool is go-openai's Tool as its MarshalJSON writes one without extra parameters.
type wireTool struct {
	Type     openai.ToolType            `json:"type"`
	Function *openai.FunctionDefinition `json:"function,omitempty"`
}

// encodeRequest encodes creq as go-openai would send it. It refuses the fields that
// wireRequest does not carry, so that a new setting in request cannot be dropped silently.
// tools, when not nil, is the encoding of creq.Tools (a toolSet's), which is then not
// encoded again.
func encodeRequest(creq openai.ChatCompletionRequest, tools []byte) ([]byte, error) {
	rest := creq
	//lint:ignore SA1019 other servers than OpenAI's still widely know only max_tokens (see request).
	rest.Model, rest.Messages, rest.MaxTokens, rest.MaxCompletionTokens, rest.Temperature, rest.Stream, rest.ResponseFormat, rest.Tools =
		"", nil, 0, 0, 0, false, nil, nil
	if !reflect.ValueOf(rest).IsZero() {
		return nil, errors.New("encode request: it sets a field the client does not encode")
	}
	//lint:ignore SA1019 other servers than OpenAI's still widely know only max_tokens (see request).
	w := wireRequest{Model: creq.Model, MaxTokens: creq.MaxTokens, MaxCompletionTokens: creq.MaxCompletionTokens,
		Temperature: creq.Temperature, Stream: creq.Stream, ResponseFormat: creq.ResponseFormat,
		Messages: make([]wireRequestMessage, len(creq.Messages))}
	for i, m := range creq.Messages {
		if len(m.MultiContent) > 0 || m.Refusal != "" || m.Name != "" || m.ReasoningContent != "" || m.FunctionCall != nil {
			return nil, fmt.Errorf("encode request: message %d sets a field the client does not encode", i)
		}
		w.Messages[i] = wireRequestMessage{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
	}
	if tools == nil && len(creq.Tools) > 0 {
		var err error
		if tools, err = encodeTools(creq.Tools); err != nil {
			return nil, err
		}
	}
	// One buffer, sized for the messages' text and the tools, takes the whole body.
	size := len(tools) + 256
	for _, m := range creq.Messages {
		size += len(m.Content) + 64
		for _, tc := range m.ToolCalls {
			size += len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments) + 64
		}
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	if err := json.NewEncoder(buf).Encode(&w); err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n")) // Encode ends the value with a newline
	if len(tools) == 0 {
		return body, nil
	}
	// The tools go last, as the object's last member: body ends with its closing brace.
	body = append(body[:len(body)-1], `,"tools":`...)
	body = append(body, tools...)
	return append(body, '}'), nil
}

// endpoint is where a chat completion goes and how it is authorised, as go-openai builds
// them for the client's configuration.
type endpoint struct {
	url    string
	header http.Header
}

func newEndpoint(oc openai.ClientConfig, model, apiKey string) endpoint {
	const suffix = "/chat/completions"
	base := strings.TrimRight(oc.BaseURL, "/")
	e := endpoint{header: http.Header{}}
	if oc.APIType == openai.APITypeAzure || oc.APIType == openai.APITypeAzureAD {
		deployment := oc.GetAzureDeploymentByModel(model)
		if deployment == "" {
			deployment = "UNKNOWN"
		}
		base += "/openai/deployments/" + deployment
	}
	e.url = base + suffix
	if oc.APIVersion != "" {
		e.url += "?" + url.Values{"api-version": {oc.APIVersion}}.Encode()
	}
	switch {
	case oc.APIType == openai.APITypeAzure:
		e.header.Set("api-key", apiKey)
	case apiKey != "":
		e.header.Set("Authorization", "Bearer "+apiKey)
	}
	if oc.OrgID != "" {
		e.header.Set("OpenAI-Organization", oc.OrgID)
	}
	e.header.Set("Accept", "application/json")
	e.header.Set("Content-Type", "application/json")
	return e
}

// post sends body and reads the reply to its end, so that the header tap keeps it. A
// failed status is returned as go-openai's error for it.
func (c *Client) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range c.endpoint.header {
		req.Header[k] = v
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest {
		return apiError(resp)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// apiError is what go-openai returns for a failed status: the error object of the body
// with the status set, or a RequestError with the body when there is none.
func apiError(resp *http.Response) error {
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("error, reading response body: %w", err)
	}
	var errRes openai.ErrorResponse
	err = json.Unmarshal(body, &errRes)
	if err != nil || errRes.Error == nil {
		reqErr := &openai.RequestError{HTTPStatus: resp.Status, HTTPStatusCode: resp.StatusCode, Err: err, Body: body}
		if errRes.Error != nil {
			reqErr.Err = errRes.Error
		}
		return reqErr
	}
	errRes.Error.HTTPStatus = resp.Status
	errRes.Error.HTTPStatusCode = resp.StatusCode
	return errRes.Error
}
