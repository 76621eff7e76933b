package llmtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// maxBody bounds a request body; a real conversation is far smaller.
const maxBody = 32 << 20

// Server is a scripted OpenAI-compatible chat completions server. It is an http.Handler, so
// it can be mounted in another server, or listen on its own with Start. It is safe for
// concurrent use: each request takes the next step of the script.
type Server struct {
	mu       sync.Mutex
	script   []Step
	played   int
	fallback Step
	reqs     []Request
	nextID   int

	// done is closed by Close, so that hanging and delayed handlers return.
	done      chan struct{}
	closeOnce sync.Once
	srv       *http.Server
	url       string
}

// New returns a server that plays script. It does not listen until Start.
func New(script ...Step) *Server {
	return &Server{
		script:   append([]Step(nil), script...),
		fallback: Func(exhausted),
		done:     make(chan struct{}),
	}
}

// TB is the part of testing.TB that NewTest uses; taking it instead of testing.TB keeps the
// testing package out of binaries that use this one.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// NewTest starts a server that plays script and closes it when the test ends.
func NewTest(t TB, script ...Step) *Server {
	t.Helper()
	s := New(script...)
	if err := s.Start(); err != nil {
		t.Fatalf("start llmtest server: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start listens on a free port of the loopback interface.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		ln.Close()
		return errors.New("start: the server is already started")
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.url = "http://" + ln.Addr().String() + "/v1"
	go s.srv.Serve(ln) //nolint:errcheck // Serve returns ErrServerClosed after Close, nothing else to report.
	return nil
}

// URL is the base URL to give an OpenAI client: it ends in /v1, without a trailing slash.
// It is empty before Start.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Close stops the server: handlers that hang or wait return and connections are closed.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// Push appends steps to the script.
func (s *Server) Push(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, steps...)
}

// SetFallback sets the step that answers once the script is used up; a Func step answers
// any number of requests.
func (s *Server) SetFallback(step Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = step
}

// Requests returns a copy of the requests received so far, in the order they arrived.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// Remaining is the number of script steps not played yet.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script) - s.played
}

// exhausted is the default fallback.
func exhausted(r Request) Step {
	return Error(http.StatusInternalServerError, "llmtest: the script is exhausted: no step left to answer this request")
}

// ServeHTTP answers POST requests to any path ending in /chat/completions.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(strings.TrimRight(r.URL.Path, "/"), "/chat/completions") {
		writeError(w, http.StatusNotFound, "llmtest: only /chat/completions is served, not "+r.URL.Path)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "llmtest: chat completions take POST, not "+r.Method)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "llmtest: read request body: "+err.Error())
		return
	}
	req, err := decodeRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "llmtest: "+err.Error())
		return
	}
	req.Path, req.Query, req.Header = r.URL.Path, r.URL.RawQuery, r.Header.Clone()

	step, ok := resolve(s.next(req), req)
	if !ok {
		writeError(w, http.StatusInternalServerError, "llmtest: Func steps nested too deeply")
		return
	}
	s.play(r.Context(), w, req, step)
}

// resolve calls Func steps until it has a step to play. What the script set on a Func step
// (a delay, truncation, headers, usage) applies to the step it returns. A Func may return
// another Func; a bound keeps a careless script from looping forever.
func resolve(step Step, req Request) (Step, bool) {
	for range 8 {
		if step.kind != kindFunc {
			return step, true
		}
		outer := step
		step = outer.fn(req)
		step.delay += outer.delay
		step.truncate = step.truncate || outer.truncate
		if step.usage == nil {
			step.usage = outer.usage
		}
		for k, vs := range outer.header {
			for _, v := range vs {
				step = step.WithHeader(k, v)
			}
		}
	}
	return step, step.kind != kindFunc
}

// next records req and takes the step that answers it.
func (s *Server) next(req Request) Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	if s.played < len(s.script) {
		st := s.script[s.played]
		s.played++
		return st
	}
	return s.fallback
}

// seq returns the next number for a generated ID.
func (s *Server) seq() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	return s.nextID
}

// wait waits d, and reports false when the client or the server gives up first.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.done:
	}
	return false
}

func (s *Server) play(ctx context.Context, w http.ResponseWriter, req Request, step Step) {
	if !s.wait(ctx, step.delay) {
		// Cut the connection: an empty 200 would look like an answer.
		panic(http.ErrAbortHandler)
	}
	for k, vs := range step.header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	switch step.kind {
	case kindHang:
		select {
		case <-ctx.Done():
		case <-s.done:
		}
		panic(http.ErrAbortHandler)
	case kindError:
		writeError(w, step.status, step.message)
	case kindRaw:
		s.writeRaw(w, req, step)
	case kindRecording:
		writeRecording(w, step)
	case kindReply:
		rep := s.reply(req, step)
		if req.Stream {
			s.writeStream(w, req, rep, step.truncate)
		} else {
			writeJSON(w, rep.message(), step.truncate)
		}
	}
}

func (s *Server) writeRaw(w http.ResponseWriter, req Request, step Step) {
	body := step.body
	if req.Stream && step.status == http.StatusOK {
		// A stream carries the body as one event, so that a broken body is a broken chunk.
		w.Header().Set("Content-Type", "text/event-stream")
		body = "data: " + body + "\n\n"
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(step.status)
	if step.truncate {
		io.WriteString(w, body[:len(body)/2])
		abort(w)
	}
	io.WriteString(w, body)
}

func writeRecording(w http.ResponseWriter, step Step) {
	if strings.HasPrefix(strings.TrimSpace(step.body), "{") {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
	}
	w.WriteHeader(step.status)
	if step.truncate {
		io.WriteString(w, step.body[:len(step.body)/2])
		abort(w)
	}
	io.WriteString(w, step.body)
}

// abort cuts the connection after flushing what was written, so the client sees a reply that
// ends in the middle rather than a clean end.
func abort(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	panic(http.ErrAbortHandler)
}
