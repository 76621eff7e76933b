package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// Sizes, in characters, of the pieces a streamed text and streamed arguments are cut into.
// They are small and odd so that pieces end inside words, multi-byte characters' neighbours
// and JSON escapes, as real streams do.
const (
	textPiece = 7
	argsPiece = 5
)

// reply is a scripted reply, resolved for one request.
type reply struct {
	id     string
	model  string
	text   string
	calls  []ToolCall
	finish string
	usage  Usage
}

func (s *Server) reply(req Request, step Step) reply {
	rep := reply{model: req.Model, text: step.text, finish: step.finish}
	rep.id = "chatcmpl-" + strconv.Itoa(s.seq())
	completion := utf8.RuneCountInString(step.text)
	for _, c := range step.calls {
		if c.ID == "" {
			c.ID = "call_" + strconv.Itoa(s.seq())
		}
		completion += utf8.RuneCountInString(c.Arguments)
		rep.calls = append(rep.calls, c)
	}
	if rep.finish == "" {
		rep.finish = "stop"
		if len(rep.calls) > 0 {
			rep.finish = "tool_calls"
		}
	}
	if step.usage != nil {
		rep.usage = *step.usage
	} else {
		rep.usage = Usage{PromptTokens: req.Chars() / 4, CompletionTokens: completion / 4}
	}
	return rep
}

type wireResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []wireChoice `json:"choices"`
	Usage   *wireUsage   `json:"usage,omitempty"`
}

type wireChoice struct {
	Index        int             `json:"index"`
	Message      *wireOutMessage `json:"message,omitempty"`
	Delta        *wireDelta      `json:"delta,omitempty"`
	FinishReason *string         `json:"finish_reason"`
}

type wireOutMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type wireDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   string         `json:"content,omitempty"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (rep reply) wireUsage() *wireUsage {
	u := &wireUsage{
		PromptTokens:     rep.usage.PromptTokens,
		CompletionTokens: rep.usage.CompletionTokens,
		TotalTokens:      rep.usage.PromptTokens + rep.usage.CompletionTokens,
	}
	u.PromptTokensDetails.CachedTokens = rep.usage.CachedTokens
	return u
}

func (rep reply) envelope(object string, choices []wireChoice) wireResponse {
	return wireResponse{ID: rep.id, Object: object, Created: time.Now().Unix(), Model: rep.model, Choices: choices}
}

// message is the reply as one chat.completion object.
func (rep reply) message() wireResponse {
	msg := &wireOutMessage{Role: "assistant"}
	// OpenAI sends a null content next to tool calls and a string otherwise.
	if rep.text != "" || len(rep.calls) == 0 {
		msg.Content = &rep.text
	}
	for _, c := range rep.calls {
		wc := wireToolCall{ID: c.ID, Type: "function"}
		wc.Function.Name, wc.Function.Arguments = c.Name, c.Arguments
		msg.ToolCalls = append(msg.ToolCalls, wc)
	}
	finish := rep.finish
	resp := rep.envelope("chat.completion", []wireChoice{{Message: msg, FinishReason: &finish}})
	resp.Usage = rep.wireUsage()
	return resp
}

// chunks is the reply as a stream of chat.completion.chunk objects: the role, the text in
// pieces, each call's ID and name followed by its arguments in pieces, the calls interleaved
// with one another, the finish reason, and the usage when asked for.
func (rep reply) chunks(includeUsage bool) []wireResponse {
	var out []wireResponse
	delta := func(d wireDelta) {
		out = append(out, rep.envelope("chat.completion.chunk", []wireChoice{{Delta: &d}}))
	}
	delta(wireDelta{Role: "assistant"})
	for _, p := range split(rep.text, textPiece) {
		delta(wireDelta{Content: p})
	}
	// seqs[i] is the sequence of deltas of call i; round r sends every call's r-th delta.
	seqs := make([][]wireToolCall, len(rep.calls))
	longest := 0
	for i, c := range rep.calls {
		head := wireToolCall{Index: &i, ID: c.ID, Type: "function"}
		head.Function.Name = c.Name
		seqs[i] = append(seqs[i], head)
		for _, p := range split(c.Arguments, argsPiece) {
			d := wireToolCall{Index: &i}
			d.Function.Arguments = p
			seqs[i] = append(seqs[i], d)
		}
		longest = max(longest, len(seqs[i]))
	}
	for r := range longest {
		for _, seq := range seqs {
			if r < len(seq) {
				delta(wireDelta{ToolCalls: []wireToolCall{seq[r]}})
			}
		}
	}
	finish := rep.finish
	out = append(out, rep.envelope("chat.completion.chunk", []wireChoice{{Delta: &wireDelta{}, FinishReason: &finish}}))
	if includeUsage {
		last := rep.envelope("chat.completion.chunk", []wireChoice{})
		last.Usage = rep.wireUsage()
		out = append(out, last)
	}
	return out
}

// split cuts s into pieces of at most n characters.
func split(s string, n int) []string {
	var out []string
	for s != "" {
		i, count := 0, 0
		for i < len(s) && count < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			count++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

func (s *Server) writeStream(w http.ResponseWriter, req Request, rep reply, truncate bool) {
	chunks := rep.chunks(req.IncludeUsage)
	if truncate {
		chunks = chunks[:max(1, len(chunks)/2)]
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	for _, c := range chunks {
		b, err := json.Marshal(c)
		if err != nil {
			panic(fmt.Sprintf("llmtest: marshal chunk: %v", err)) // Only plain values are marshalled.
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	if truncate {
		abort(w)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func writeJSON(w http.ResponseWriter, v any, truncate bool) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("llmtest: marshal reply: %v", err)) // Only plain values are marshalled.
	}
	w.Header().Set("Content-Type", "application/json")
	if truncate {
		// The promised length makes the cut visible to the client as an unexpected EOF.
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b[:len(b)/2])
		abort(w)
	}
	w.Write(b)
}

// writeError answers with an error in OpenAI's format.
func writeError(w http.ResponseWriter, code int, message string) {
	typ := "invalid_request_error"
	switch {
	case code == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case code >= 500:
		typ = "server_error"
	}
	body := map[string]any{"error": map[string]any{"message": message, "type": typ, "code": nil}}
	b, _ := json.Marshal(body) // A map of strings always marshals.
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}
