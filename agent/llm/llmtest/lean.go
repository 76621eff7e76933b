package llmtest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// Lean is a chat completions server for load benchmarks, in which the fake model shares the
// machine with the bot being measured and must cost it as little as a model served
// elsewhere would. Server records every request and decodes it into values, which is what
// a test wants to look at but a thousand runs stepping at once pay for in CPU and memory.
// Lean keeps no request: it reads each body once as a stream of JSON tokens, checking that
// it is one well-formed object whose messages are objects, counts what an answer depends on
// (a Shape), waits its latency and writes the answer with a few appends. It answers
// completions that are not streamed, each with one tool call or a text, and counts what it
// answered (LeanStats) so that a benchmark can check that every run made the requests it
// should have.
type Lean struct {
	latency time.Duration
	answer  func(Shape) Answer

	requests, calls, texts, refused atomic.Int64
	ids                             atomic.Int64

	// done is closed by Close, so that waiting handlers return.
	done      chan struct{}
	closeOnce sync.Once
	mu        sync.Mutex
	srv       *http.Server
	url       string
}

// Shape is what Lean reads of a request.
type Shape struct {
	Messages int
	// ToolResults counts the messages of role "tool".
	ToolResults int
	// Tools counts the tools offered.
	Tools int
	// ContentBytes is the length of the message contents and tool-call arguments as sent
	// (quoted and escaped), the base of the token usage Lean reports (a quarter of it).
	ContentBytes int
}

// Answer is what Lean replies: a call of Tool with Arguments when Tool is set, else Text.
type Answer struct {
	Text      string
	Tool      string
	Arguments string
}

// LeanStats counts a Lean server's requests: every request it read, the tool calls and the
// texts it answered, and the requests it refused (not a POST to chat completions, a body
// that is not a well-formed request, a stream).
type LeanStats struct {
	Requests  int64 `json:"requests"`
	ToolCalls int64 `json:"tool_calls"`
	Texts     int64 `json:"texts"`
	Refused   int64 `json:"refused"`
}

// NewLean returns a server that answers each request with answer(its shape) after latency.
// It does not listen until Start.
func NewLean(latency time.Duration, answer func(Shape) Answer) *Lean {
	return &Lean{latency: latency, answer: answer, done: make(chan struct{})}
}

// Start listens on a free port of the loopback interface.
func (l *Lean) Start() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.srv != nil {
		ln.Close()
		return errors.New("start: the server is already started")
	}
	l.srv = &http.Server{Handler: l, ReadHeaderTimeout: 10 * time.Second}
	l.url = "http://" + ln.Addr().String() + "/v1"
	go l.srv.Serve(ln) //nolint:errcheck // Serve returns ErrServerClosed after Close, nothing else to report.
	return nil
}

// URL is the base URL to give an OpenAI client, ending in /v1; empty before Start.
func (l *Lean) URL() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.url
}

// Close stops the server: waiting handlers return and connections are closed.
func (l *Lean) Close() {
	l.closeOnce.Do(func() { close(l.done) })
	l.mu.Lock()
	srv := l.srv
	l.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// Stats returns the counts so far.
func (l *Lean) Stats() LeanStats {
	return LeanStats{Requests: l.requests.Load(), ToolCalls: l.calls.Load(), Texts: l.texts.Load(), Refused: l.refused.Load()}
}

// leanDecoders are the token readers of requests being read, kept with their buffers.
var leanDecoders = sync.Pool{New: func() any { return new(jsontext.Decoder) }}

// leanBuffers hold replies being written.
var leanBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// ServeHTTP answers POST requests to any path ending in /chat/completions.
func (l *Lean) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.requests.Add(1)
	if !strings.HasSuffix(strings.TrimRight(r.URL.Path, "/"), "/chat/completions") {
		l.refuse(w, http.StatusNotFound, "llmtest: only /chat/completions is served, not "+r.URL.Path)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		l.refuse(w, http.StatusMethodNotAllowed, "llmtest: chat completions take POST, not "+r.Method)
		return
	}
	bp := leanBuffers.Get().(*[]byte)
	defer leanBuffers.Put(bp)
	dec := leanDecoders.Get().(*jsontext.Decoder)
	dec.Reset(http.MaxBytesReader(w, r.Body, maxBody))
	shape, model, stream, err := readShape(dec)
	dec.Reset(strings.NewReader("")) // let go of the body
	leanDecoders.Put(dec)
	if err != nil {
		l.refuse(w, http.StatusBadRequest, "llmtest: decode request: "+err.Error())
		return
	}
	if stream {
		l.refuse(w, http.StatusBadRequest, "llmtest: the lean server answers only completions that are not streamed")
		return
	}
	a := l.answer(shape)

	t := time.NewTimer(l.latency)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		panic(http.ErrAbortHandler) // an empty 200 would look like an answer
	case <-l.done:
		panic(http.ErrAbortHandler)
	}
	if a.Tool != "" {
		l.calls.Add(1)
	} else {
		l.texts.Add(1)
	}
	*bp = l.appendReply((*bp)[:0], model, shape, a)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(*bp)))
	w.Write(*bp)
}

func (l *Lean) refuse(w http.ResponseWriter, code int, message string) {
	l.refused.Add(1)
	writeError(w, code, message)
}

// readShape reads a request body from dec: one JSON object whose "messages" is an array of
// objects and "tools" an array, and nothing after it. It returns the model's name as quoted
// in the body; what it does not need is skipped, not decoded.
func readShape(dec *jsontext.Decoder) (sh Shape, model string, stream bool, err error) {
	if err := readDelim(dec, '{'); err != nil {
		return sh, "", false, err
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return sh, "", false, err
		}
		switch name.String() {
		case "model":
			v, err := dec.ReadValue()
			if err != nil {
				return sh, "", false, err
			}
			if v.Kind() != '"' {
				return sh, "", false, errors.New("model is not a string")
			}
			model = string(v)
		case "stream":
			tok, err := dec.ReadToken()
			if err != nil {
				return sh, "", false, err
			}
			if k := tok.Kind(); k != 't' && k != 'f' {
				return sh, "", false, errors.New("stream is not a boolean")
			}
			stream = tok.Bool()
		case "messages":
			if err := readMessages(dec, &sh); err != nil {
				return sh, "", false, err
			}
		case "tools":
			if err := readDelim(dec, '['); err != nil {
				return sh, "", false, fmt.Errorf("tools: %w", err)
			}
			for dec.PeekKind() != ']' {
				if err := dec.SkipValue(); err != nil {
					return sh, "", false, err
				}
				sh.Tools++
			}
			if err := readDelim(dec, ']'); err != nil {
				return sh, "", false, err
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return sh, "", false, err
			}
		}
	}
	if err := readDelim(dec, '}'); err != nil {
		return sh, "", false, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return sh, "", false, errors.New("the body holds more than one JSON value")
	}
	if len(model) == 0 {
		return sh, "", false, errors.New("no model")
	}
	return sh, model, stream, nil
}

// readMessages reads the messages array, counting them, the tool results and the bytes of
// contents and tool-call arguments.
func readMessages(dec *jsontext.Decoder, sh *Shape) error {
	if err := readDelim(dec, '['); err != nil {
		return fmt.Errorf("messages: %w", err)
	}
	for dec.PeekKind() != ']' {
		if err := readDelim(dec, '{'); err != nil {
			return fmt.Errorf("message %d: %w", sh.Messages, err)
		}
		for dec.PeekKind() == '"' {
			name, err := dec.ReadToken()
			if err != nil {
				return err
			}
			switch name.String() {
			case "role":
				role, err := dec.ReadToken()
				if err != nil {
					return err
				}
				if role.Kind() != '"' {
					return fmt.Errorf("message %d: the role is not a string", sh.Messages)
				}
				if role.String() == "tool" {
					sh.ToolResults++
				}
			case "content", "tool_calls":
				// Tool calls are counted whole: their arguments are most of them.
				v, err := dec.ReadValue()
				if err != nil {
					return err
				}
				sh.ContentBytes += len(v)
			default:
				if err := dec.SkipValue(); err != nil {
					return err
				}
			}
		}
		if err := readDelim(dec, '}'); err != nil {
			return err
		}
		sh.Messages++
	}
	return readDelim(dec, ']')
}

// readDelim reads one of {, }, [ or ], and fails when the next token is another.
func readDelim(dec *jsontext.Decoder, want jsontext.Kind) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if k := tok.Kind(); k != want {
		return fmt.Errorf("found %v where %v belongs", k, want)
	}
	return nil
}

// appendReply appends the chat.completion object answering a request of shape sh for
// model (quoted, as the request had it) with a.
func (l *Lean) appendReply(b []byte, model string, sh Shape, a Answer) []byte {
	b = append(b, `{"id":"chatcmpl-`...)
	b = strconv.AppendInt(b, l.ids.Add(1), 10)
	b = append(b, `","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, time.Now().Unix(), 10)
	b = append(b, `,"model":`...)
	b = append(b, model...)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	completion := len(a.Text)
	if a.Tool != "" {
		completion = len(a.Arguments)
		b = append(b, `null,"tool_calls":[{"id":"call_`...)
		b = strconv.AppendInt(b, l.ids.Add(1), 10)
		b = append(b, `","type":"function","function":{"name":`...)
		b = appendQuoted(b, a.Tool)
		b = append(b, `,"arguments":`...)
		b = appendQuoted(b, a.Arguments)
		b = append(b, `}}]},"finish_reason":"tool_calls"}]`...)
	} else {
		b = appendQuoted(b, a.Text)
		b = append(b, `},"finish_reason":"stop"}]`...)
	}
	prompt, completion := sh.ContentBytes/4, completion/4
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":0}}}`...)
	return b
}

// appendQuoted appends s as a JSON string. Invalid UTF-8 comes out replaced, as encoding/json
// writes it, so the error that tells of it is not needed.
func appendQuoted(b []byte, s string) []byte {
	out, _ := jsontext.AppendQuote(b, s)
	return out
}
