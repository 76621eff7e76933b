package main

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// The model fault tests break the model endpoint under the real binary: rate limits, server
// errors, hangs, broken and truncated bodies, malformed tool calls, a model that loops and a
// model that never stops. Each run must end where a person can see why: completed after the
// fault, or paused or stopped with a short, safe message in the thread, never lost and never
// left running.

var (
	continueButton = regexp.MustCompile(`data-action="([^"]+)"[^>]*>Continue`)
	stopButton     = regexp.MustCompile(`data-action="([^"]+)"[^>]*>Stop`)
)

// timedModel is a scripted model that notes when each request arrived, so a test can see
// how long the client waited between attempts.
type timedModel struct {
	*llmtest.Server
	mu sync.Mutex
	at []time.Time
}

// newTimedModel plays faults, one per request, and then answers every later request with
// answer.
func newTimedModel(t *testing.T, faults []llmtest.Step, answer func(llmtest.Request) llmtest.Step) *timedModel {
	t.Helper()
	m := &timedModel{Server: llmtest.NewTest(t)}
	m.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		m.mu.Lock()
		i := len(m.at)
		m.at = append(m.at, time.Now())
		m.mu.Unlock()
		if i < len(faults) {
			return faults[i]
		}
		return answer(r)
	}))
	return m
}

// gaps are the times between consecutive requests.
func (m *timedModel) gaps() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(m.at); i++ {
		out = append(out, m.at[i].Sub(m.at[i-1]))
	}
	return out
}

// press clicks a button of the thread as user and returns the notice the user got.
func (c consoleClient) press(thread, action, user string, n int) string {
	c.t.Helper()
	res := c.post("/api/actions", map[string]string{"id": uuid(n), "user": user, "action": action, "thread": thread})
	notice, _ := res["notice"].(string)
	return notice
}

// assertSafeText fails when text a person sees carries what belongs in the log only: the
// fake server's own error texts, the endpoint's address, Go error chains.
func assertSafeText(t *testing.T, text, modelURL string) {
	t.Helper()
	u, err := url.Parse(modelURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"llmtest", u.Host, "chat/completions", "context deadline", "unexpected EOF", "panic", "goroutine"} {
		if strings.Contains(text, leak) {
			t.Errorf("the thread shows %q, which belongs in the log only:\n%s", leak, text)
		}
	}
}

// fastEdits lets the bot post and edit in the console's one channel without the default
// second between calls, which would only slow the tests down.
const fastEdits = "[bot]\nedit_interval = \"20ms\"\n"

// recovered is what the model answers once a fault is over.
const recovered = "Recovered after the fault."

// TestFaultModelEndpoint breaks the model endpoint in one way per case. A fault the client
// retries must end in a completed run with the model asked exactly as often as the case
// says; a fault that outlasts the retries must pause the run with a clear message and a
// Continue button, after which the run completes; a malformed tool call must be answered to
// the model as an error so that it can recover.
func TestFaultModelEndpoint(t *testing.T) {
	bin := loopbotBinary(t)
	tests := []struct {
		name   string
		config string
		faults []llmtest.Step
		// paused, when set, is the message the run pauses with after the faults; the test
		// presses Continue and the model answers.
		paused *regexp.Regexp
		// asked is how many requests the model gets in all.
		asked int
		// minGap is the least time the client must wait between two attempts.
		minGap time.Duration
		// toolError is what the model must be told about its malformed call.
		toolError *regexp.Regexp
	}{
		{
			name:   "429 storm honouring Retry-After",
			faults: repeatStep(llmtest.Status(http.StatusTooManyRequests, time.Second), 3),
			asked:  4,
			minGap: time.Second,
		},
		{
			name:   "429 storm outlasting the retries",
			config: "[llm]\nmax_retries = 2\n",
			faults: repeatStep(llmtest.Status(http.StatusTooManyRequests, time.Second), 3),
			paused: regexp.MustCompile(`The model could not be reached \(rate limited\)\. Continue to try again\.`),
			asked:  4,
			minGap: time.Second,
		},
		{
			name:   "429 asking for a longer wait than the client holds a run for",
			faults: []llmtest.Step{llmtest.Status(http.StatusTooManyRequests, 2*time.Minute)},
			paused: regexp.MustCompile(`The model could not be reached \(rate limited\)\. Continue to try again\.`),
			asked:  2,
		},
		{
			name: "500s then success",
			faults: []llmtest.Step{
				llmtest.Status(http.StatusInternalServerError, 0),
				llmtest.Status(http.StatusBadGateway, 0),
				llmtest.Status(http.StatusServiceUnavailable, 0),
			},
			asked: 4,
		},
		{
			name:   "hang and slow reply beyond the timeout",
			config: "[llm]\ntimeout = \"500ms\"\n",
			faults: []llmtest.Step{llmtest.Hang(), llmtest.Delay(time.Minute, llmtest.Text("too late"))},
			asked:  3,
			minGap: 500 * time.Millisecond,
		},
		{
			name:   "every attempt times out",
			config: "[llm]\ntimeout = \"300ms\"\nmax_retries = 1\n",
			faults: []llmtest.Step{llmtest.Hang(), llmtest.Hang()},
			paused: regexp.MustCompile(`The model could not be reached \(timed out: the model endpoint did not answer in time; check that the server is up and not overloaded, or raise \[llm\] timeout\)\. Continue to try again\.`),
			asked:  3,
		},
		{
			name:   "invalid JSON body",
			faults: []llmtest.Step{llmtest.InvalidJSON()},
			paused: regexp.MustCompile(`The model could not be reached \(the endpoint\S{1,6}s reply is not a chat completion; check that \[llm\] base_url points at an OpenAI-compatible API\)\. Continue to try again\.`),
			asked:  2,
		},
		{
			name:   "invalid JSON in a stream",
			config: "[llm]\nstream = true\n",
			faults: []llmtest.Step{llmtest.InvalidJSON()},
			paused: regexp.MustCompile(`The model could not be reached \(the endpoint\S{1,6}s reply is not a chat completion; check that \[llm\] base_url points at an OpenAI-compatible API\)\. Continue to try again\.`),
			asked:  2,
		},
		{
			name:   "truncated stream",
			config: "[llm]\nstream = true\n",
			faults: []llmtest.Step{llmtest.Truncate(llmtest.ToolCalls(llmtest.Call("list_files", `{"path":".","recursive":true}`)))},
			asked:  2,
		},
		{
			name:   "truncated body",
			faults: []llmtest.Step{llmtest.Truncate(llmtest.Text("an answer cut in the middle of its body"))},
			asked:  2,
		},
		{
			name:      "tool arguments that are not JSON",
			faults:    []llmtest.Step{llmtest.ToolCalls(llmtest.Call("read_file", `{"path": "notes.txt"`))},
			asked:     2,
			toolError: regexp.MustCompile(`^Error: the arguments of read_file are not a JSON object .*send them again as valid JSON`),
		},
		{
			name:      "unknown tool",
			faults:    []llmtest.Step{llmtest.ToolCalls(llmtest.Call("delete_everything", `{"path":"/"}`))},
			asked:     2,
			toolError: regexp.MustCompile(`^Error: unknown tool "delete_everything"; the tools you can call are: .*list_files`),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := newTimedModel(t, tt.faults, func(llmtest.Request) llmtest.Step { return llmtest.Text(recovered) })
			s := newFaultSetup(t, model.Server, fastEdits+tt.config)
			logs := newLogBuffer()
			c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
			p := startLoopbot(t, bin, s.config, s.env, logs)
			goal := "survive a broken model: " + tt.name
			thread := c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": goal})["thread"].(string)

			if tt.paused != nil {
				c.waitFor(thread, tt.paused)
				if n := len(model.Requests()); n != len(tt.faults) {
					t.Errorf("paused after %d model requests, want %d (one per attempt)", n, len(tt.faults))
				}
				cont := c.waitFor(thread, continueButton)[1]
				if n := c.press(thread, cont, "ann", 2); n != "" {
					t.Fatalf("Continue was refused: %q", n)
				}
			}
			c.waitFor(thread, regexp.MustCompile(regexp.QuoteMeta(recovered)))
			shown := c.threadText(thread)
			p.terminate(25 * time.Second)

			runs := invariants{db: s.db, goals: []string{goal}, shown: []string{shown}, logs: logs.String(), settled: true}.check(t)
			if len(runs) != 1 || runs[0].Status != agent.StatusCompleted || runs[0].State.Answer != recovered {
				t.Fatalf("runs = %+v, want one completed with the recovered answer", runs)
			}
			assertSafeText(t, shown, model.URL())
			reqs := model.Requests()
			if len(reqs) != tt.asked {
				t.Errorf("the model was asked %d times, want %d", len(reqs), tt.asked)
			}
			if tt.minGap > 0 {
				// The waits of one model call: between its attempts and, unless the run
				// paused, before the attempt that succeeded.
				waits := len(tt.faults)
				if tt.paused != nil {
					waits--
				}
				for i, g := range model.gaps()[:waits] {
					if g < tt.minGap {
						t.Errorf("attempt %d came %s after the one before, want at least %s", i+2, g, tt.minGap)
					}
				}
			}
			if tt.toolError != nil {
				last := reqs[len(reqs)-1].LastMessage()
				if last.Role != "tool" || !tt.toolError.MatchString(last.Content) {
					t.Errorf("after the malformed call the model got %s message %q, want a tool message matching %s", last.Role, last.Content, tt.toolError)
				}
				for _, call := range runs[0].State.Calls {
					if call.Status != agent.CallInvalid || call.Attempts != 0 {
						t.Errorf("call %s(%s) is %s after %d attempts, want invalid and never run", call.Name, call.Arguments, call.Status, call.Attempts)
					}
				}
			}
		})
	}
}

func repeatStep(s llmtest.Step, n int) []llmtest.Step {
	out := make([]llmtest.Step, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestFaultModelRepeatsItself has a model that makes the same tool call forever: stuck
// detection pauses the run after stuck_threshold calls with Continue and Stop, and Stop
// cancels it, so the tool ran a bounded number of times.
func TestFaultModelRepeatsItself(t *testing.T) {
	bin := loopbotBinary(t)
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.ToolCalls(llmtest.Call("list_files", `{"path":"."}`)))
	s := newFaultSetup(t, model, fastEdits+"[agent]\nstuck_threshold = 3\n")
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
	p := startLoopbot(t, bin, s.config, s.env, logs)
	const goal = "look at the workspace until you are sure"
	thread := c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": goal})["thread"].(string)

	c.waitFor(thread, regexp.MustCompile(`The same tool call was made 3 times in a row; the run looks stuck\.`))
	if n := len(model.Requests()); n != 3 {
		t.Errorf("the model was asked %d times before the pause, want 3", n)
	}
	stop := c.waitFor(thread, stopButton)[1]
	if n := c.press(thread, stop, "ann", 2); n != "" {
		t.Fatalf("Stop was refused: %q", n)
	}
	c.waitFor(thread, regexp.MustCompile(`Run cancelled`))
	shown := c.threadText(thread)
	p.terminate(25 * time.Second)

	runs := invariants{db: s.db, goals: []string{goal}, shown: []string{shown}, logs: logs.String(), settled: true}.check(t)
	if len(runs) != 1 || runs[0].Status != agent.StatusCancelled {
		t.Fatalf("runs = %+v, want one cancelled", runs)
	}
	ran := 0
	for _, call := range runs[0].State.Calls {
		if call.Name == "list_files" {
			ran += call.Attempts
		}
	}
	if ran != 3 {
		t.Errorf("list_files ran %d times, want 3 (the stuck threshold)", ran)
	}
	if n := len(model.Requests()); n != 3 {
		t.Errorf("the model was asked %d times in all, want 3: nothing after Stop", n)
	}
}

// TestFaultModelNeverFinishes has a model that always asks for one more distinct tool call:
// near the step budget the loop asks it for a final answer without tools, and the run ends
// as budget_exhausted with that answer and the loop's account of what was done.
func TestFaultModelNeverFinishes(t *testing.T) {
	bin := loopbotBinary(t)
	const final = "Final answer: I wrote four notes and there is always more to write."
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		if len(r.Tools) == 0 {
			return llmtest.Text(final)
		}
		n := 1
		for _, m := range r.Messages {
			if m.Role == "tool" {
				n++
			}
		}
		return llmtest.ToolCalls(llmtest.Call("write_file", fmt.Sprintf(`{"path":"note-%d.txt","content":"note %d"}`, n, n)))
	}))
	s := newFaultSetup(t, model, fastEdits+"[agent]\nmax_steps = 5\n")
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
	p := startLoopbot(t, bin, s.config, s.env, logs)
	const goal = "write notes forever"
	thread := c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": goal})["thread"].(string)

	c.waitFor(thread, regexp.MustCompile(`Run stopped: budget spent`))
	c.waitFor(thread, regexp.MustCompile(regexp.QuoteMeta(final)))
	shown := c.threadText(thread)
	p.terminate(25 * time.Second)

	runs := invariants{db: s.db, goals: []string{goal}, shown: []string{shown}, logs: logs.String(), settled: true}.check(t)
	if len(runs) != 1 || runs[0].Status != agent.StatusBudgetExhausted {
		t.Fatalf("runs = %+v, want one budget_exhausted", runs)
	}
	st := runs[0].State
	if !strings.Contains(st.Error, "step budget") || !strings.HasPrefix(st.Answer, final) {
		t.Errorf("error %q, answer %q: want the step budget named and the model's final answer first", st.Error, st.Answer)
	}
	if !strings.Contains(shown, "Stopped: the step budget is nearly spent.") {
		t.Errorf("the thread does not say which budget stopped the run:\n%s", shown)
	}
	reqs := model.Requests()
	if len(reqs) != 5 {
		t.Fatalf("the model was asked %d times, want 5 (max_steps)", len(reqs))
	}
	if n := len(reqs[4].Tools); n != 0 {
		t.Errorf("the last request offered %d tools, want none (a final answer)", n)
	}
	writes := 0
	for _, call := range st.Calls {
		if call.Name == "write_file" && call.Status == agent.CallSucceeded {
			writes++
		}
	}
	if writes != 4 || len(st.Calls) != 4 {
		t.Errorf("%d calls, %d successful writes; want 4 of each", len(st.Calls), writes)
	}
}
