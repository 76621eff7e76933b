package main

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// TestFaultModelUnreachableIsExplained runs the binary against a model endpoint that cannot
// serve it in the ways a newcomer meets: nothing listening, a host that does not resolve, a
// refused key, a wrong model name. The thread says what failed and what to check, without the
// endpoint's address; the log at info level names the endpoint's host and follows the run:
// started, paused, and, once the endpoint is fixed and the person presses Continue, waiting
// for approval, the decision, finished.
func TestFaultModelUnreachableIsExplained(t *testing.T) {
	bin := loopbotBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/v1"
	ln.Close()

	tests := []struct {
		name    string
		baseURL string // replaces the scripted model's URL; the run cannot recover then
		fault   []llmtest.Step
		thread  *regexp.Regexp
	}{
		{name: "nothing listening", baseURL: refused,
			thread: regexp.MustCompile(`The model could not be reached \(connection refused: nothing listens at the model endpoint\S{1,6}s address; check that the model server is running and \[llm\] base_url\)`)},
		{name: "host does not resolve", baseURL: "http://model-host.invalid/v1",
			thread: regexp.MustCompile(`\(DNS failure: the model endpoint\S{1,6}s host name does not resolve; check \[llm\] base_url\)`)},
		{name: "401", fault: []llmtest.Step{llmtest.Status(http.StatusUnauthorized, 0)},
			thread: regexp.MustCompile(`\(401 unauthorized: the endpoint refused the API key; check OPENAI_API_KEY or \[llm\] api_key\)`)},
		{name: "404", fault: []llmtest.Step{llmtest.Status(http.StatusNotFound, 0)},
			thread: regexp.MustCompile(`\(404 model not found: check \[llm\] model`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := newTimedModel(t, tt.fault, func(r llmtest.Request) llmtest.Step {
				if r.LastMessage().Role == "tool" {
					return llmtest.Text(recovered)
				}
				return llmtest.ToolCalls(llmtest.Call("write_file", `{"path":"out.txt","content":"hello\n"}`))
			})
			s := newFaultSetup(t, model.Server, fastEdits+"[llm]\nmax_retries = -1\n[agent.risk]\nwrite_file = \"confirm\"\n")
			endpoint := model.URL()
			if tt.baseURL != "" {
				endpoint = tt.baseURL
				for i, e := range s.env {
					if strings.HasPrefix(e, "OPENAI_BASE_URL=") {
						s.env[i] = "OPENAI_BASE_URL=" + tt.baseURL
					}
				}
			}
			u, err := url.Parse(endpoint)
			if err != nil {
				t.Fatal(err)
			}
			logs := newLogBuffer()
			c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
			p := startLoopbot(t, bin, s.config, s.env, logs)
			thread := c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": "write out.txt"})["thread"].(string)
			c.waitFor(thread, tt.thread)
			assertSafeText(t, c.threadText(thread), endpoint)
			waitLog(t, logs, `msg="run started"`, "model endpoint "+u.Host+": ", `msg="run paused"`)

			if tt.baseURL == "" {
				// The endpoint answers now: Continue runs on to the approval and the end.
				cont := c.waitFor(thread, continueButton)[1]
				if n := c.press(thread, cont, "ann", 2); n != "" {
					t.Fatalf("Continue was refused: %q", n)
				}
				approve := c.waitFor(thread, approveButton)[1]
				if n := c.press(thread, approve, "ann", 3); n != "" {
					t.Fatalf("Approve was refused: %q", n)
				}
				c.waitFor(thread, regexp.MustCompile(regexp.QuoteMeta(recovered)))
				waitLog(t, logs, `msg="run waiting for approval"`, "tools=write_file", `msg="approval decided"`, "outcome=approved", `msg="run finished"`, "status=completed")
			}
			p.terminate(25 * time.Second)
		})
	}
}

// waitLog waits until the log holds each of wants, in order.
func waitLog(t *testing.T, logs *logBuffer, wants ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	at := 0
	for _, w := range wants {
		next, ok := logs.waitFor(ctx, at, w)
		if !ok {
			t.Fatalf("the log lacks %q (after byte %d):\n%s", w, at, logs)
		}
		at = next
	}
}
