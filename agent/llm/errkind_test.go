package llm_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// TestModelErrorKinds fails a real call in each way a newcomer meets (nothing listening, a
// host that does not resolve, a refused key, a wrong model name, a hang) and checks the kind
// the error carries and the summary the chat would show: it says what failed and what to
// check, and holds neither the URL's host, its path, nor the key.
func TestModelErrorKinds(t *testing.T) {
	const key = "sk-secret-4411"
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL + "/v1"
	closed.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + ln.Addr().String() + "/v1"
	ln.Close()

	answer := func(status int, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/v1"
	}
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// With the body read, the server notices the client's hang-up and ends the context.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(hang.Close)
	hangup := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(hangup.Close)
	plain := answer(http.StatusOK, `{}`)

	tests := []struct {
		name    string
		baseURL string
		timeout time.Duration
		kind    llm.ErrorKind
		summary string
	}{
		{"server closed", closedURL, 0, llm.KindRefused, "connection refused"},
		{"refused port", refusedURL, 0, llm.KindRefused, "check that the model server is running and [llm] base_url"},
		{"DNS failure", "http://model-host.invalid/v1", 0, llm.KindDNS, "host name does not resolve; check [llm] base_url"},
		{"401", answer(http.StatusUnauthorized, `{"error":{"message":"Incorrect API key provided: sk-secr***4411","type":"invalid_request_error","code":"invalid_api_key"}}`), 0,
			llm.KindUnauthorized, "401 unauthorized: the endpoint refused the API key; check OPENAI_API_KEY"},
		{"403", answer(http.StatusForbidden, `{"error":{"message":"no access to model","type":"invalid_request_error"}}`), 0, llm.KindUnauthorized, "403 forbidden"},
		{"404 model not found", answer(http.StatusNotFound, `{"error":{"message":"The model 'gpt-9' does not exist","type":"invalid_request_error","code":"model_not_found"}}`), 0,
			llm.KindNotFound, "404 model not found: check [llm] model"},
		{"404 from a wrong path", answer(http.StatusNotFound, `<html>404 page not found</html>`), 0, llm.KindNotFound, "base_url is the API's root"},
		{"400", answer(http.StatusBadRequest, `{"error":{"message":"bad temperature"}}`), 0, llm.KindRejected, "rejected the request (HTTP 400)"},
		{"503", answer(http.StatusServiceUnavailable, `{"error":{"message":"overloaded"}}`), 0, llm.KindServer, "failed (HTTP 503)"},
		{"timeout", hang.URL + "/v1", 50 * time.Millisecond, llm.KindTimeout, "timed out"},
		{"hung up", hangup.URL + "/v1", 0, llm.KindConnection, "connection closed"},
		{"https to an http server", "https" + strings.TrimPrefix(plain, "http"), 0, llm.KindTLS, "TLS failure"},
		{"not a chat completion", answer(http.StatusOK, `not json at all`), 0, llm.KindBadReply, "not a chat completion"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := llm.New(llm.Config{BaseURL: tt.baseURL, APIKey: key, Model: "gpt-9", MaxRetries: -1, Timeout: agent.Duration(tt.timeout)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err = c.Complete(ctx, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}})
			var me *llm.ModelError
			if !errors.As(err, &me) {
				t.Fatalf("error %v (%T) is no *llm.ModelError", err, err)
			}
			if me.Kind != tt.kind {
				t.Errorf("kind = %v, want %v; error: %v", me.Kind, tt.kind, err)
			}
			s := me.SafeSummary()
			if !strings.Contains(s, tt.summary) {
				t.Errorf("summary %q lacks %q", s, tt.summary)
			}
			u, _ := url.Parse(tt.baseURL)
			for _, leak := range []string{u.Host, u.Hostname(), "chat/completions", key, "sk-secr", err.Error()} {
				if strings.Contains(s, leak) {
					t.Errorf("summary %q shows %q", s, leak)
				}
			}
		})
	}
}

// TestModelErrorKeepsRateLimit: a 429 that outlasts the retries is still an
// *agent.RateLimitError, which the loop schedules by, and its kind is rate limited.
func TestModelErrorKeepsRateLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	c, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", Model: "m", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Complete(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}})
	var rl *agent.RateLimitError
	var me *llm.ModelError
	if !errors.As(err, &rl) || !errors.As(err, &me) || me.Kind != llm.KindRateLimited {
		t.Errorf("error %v: want an *agent.RateLimitError and a rate-limited *llm.ModelError", err)
	}
}

// TestErrorKindOfCutReplies: a 200 whose body does not decode is a bad reply even when the
// decoder says unexpected EOF; a body or stream cut short is a closed connection.
func TestErrorKindOfCutReplies(t *testing.T) {
	tests := []struct {
		name  string
		steps []llmtest.Step
		cfg   llm.Config
		kind  llm.ErrorKind
	}{
		{"invalid JSON body", []llmtest.Step{llmtest.InvalidJSON()}, llm.Config{}, llm.KindBadReply},
		{"invalid JSON stream", []llmtest.Step{llmtest.InvalidJSON()}, llm.Config{Stream: true}, llm.KindBadReply},
		{"truncated body", []llmtest.Step{llmtest.Truncate(llmtest.Text("cut in the middle"))}, llm.Config{}, llm.KindConnection},
		{"truncated stream", []llmtest.Step{llmtest.Truncate(llmtest.Text("cut in the middle"))}, llm.Config{Stream: true}, llm.KindConnection},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewTest(t, tt.steps...)
			tt.cfg.MaxRetries = -1
			c, _ := newClient(t, srv, tt.cfg)
			_, err := c.Complete(context.Background(), userGoal)
			var me *llm.ModelError
			if !errors.As(err, &me) || me.Kind != tt.kind {
				t.Errorf("error %v: want a ModelError of kind %v", err, tt.kind)
			}
		})
	}
}
