package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

var (
	cutRE  = regexp.MustCompile(`read_output with call_id "([^"]+)" and offset (\d+) shows them`)
	readRE = regexp.MustCompile(`(?s)^\[bytes (\d+) to (\d+) of (\d+) of the result of dump \(call ([^)]+)\)(?:; offset (\d+) continues)?\]\n(.*)$`)
	wrapRE = regexp.MustCompile(`(?s)^<untrusted-[0-9a-f]+>\n(.*)\n</untrusted-[0-9a-f]+>$`)
)

// TestReadOutputReturnsTheCutPart runs a model that does what a capped output's marker says:
// it reads the cut bytes with read_output, part after part, until the end. What it was shown
// (the head, then the parts) must be the tool's output byte for byte, multi-byte characters
// included, and the parts come between the run's untrusted markers like any outside content.
func TestReadOutputReturnsTheCutPart(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 20000; i++ {
		fmt.Fprintf(&b, "row %04d: café 日本 %s\n", i, strings.Repeat("∑", i%7))
	}
	b.WriteString("error: the last row failed")
	full := b.String()
	dump := &fakeTool{name: "dump", readOnly: true, fn: func(context.Context, json.RawMessage) (string, error) { return full, nil }}

	var seen strings.Builder // the head the model was shown, then each part it read
	var reads int
	llm := newLLM(t)
	llm.route = func(req agent.Request) step {
		last := req.Messages[len(req.Messages)-1]
		if last.Role != agent.RoleTool {
			return calls(call("dump", `{"q":"all"}`))
		}
		// The wire does not carry a tool result's name: the body tells them apart.
		body := last.Content
		isRead := strings.HasPrefix(body, "<untrusted-")
		if !isRead && readRE.MatchString(body) {
			t.Errorf("read_output's result is not between the untrusted markers: %.80q", body)
			return text("done")
		}
		if m := wrapRE.FindStringSubmatch(body); m != nil {
			body = m[1]
		}
		var id string
		var next int
		switch {
		case !isRead:
			m := cutRE.FindStringSubmatch(body)
			if m == nil {
				t.Errorf("the output was not capped: %d bytes", len(body))
				return text("done")
			}
			id, next = m[1], atoi(t, m[2])
			seen.WriteString(body[:next])
			if !strings.HasSuffix(body, "error: the last row failed") {
				t.Errorf("the capped output lost its tail: %.80q", tailOf(body, 80))
			}
		default:
			m := readRE.FindStringSubmatch(body)
			if m == nil {
				t.Errorf("read_output answered %.120q", body)
				return text("done")
			}
			reads++
			if atoi(t, m[1]) != seen.Len() {
				t.Errorf("read from byte %s, want %d", m[1], seen.Len())
			}
			seen.WriteString(m[6])
			if m[5] == "" {
				return text("done")
			}
			id, next = m[4], atoi(t, m[5])
		}
		return calls(call("read_output", fmt.Sprintf(`{"call_id":%q,"offset":%d}`, id, next)))
	}
	cfg := agent.Config{OutputCap: 2000, MaxSteps: 40, NoProgressSteps: -1}
	r := newRun(t, newAgent(t, llm.model, cfg, []agent.Tool{dump}), "dump it all")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	if seen.String() != full {
		t.Fatalf("the model was shown %d bytes that are not the output's %d", seen.Len(), len(full))
	}
	// 20 KB less the 1000-byte head, at most 2000 bytes a read.
	if reads < 9 {
		t.Errorf("%d reads, want the cut part in parts of at most the cap", reads)
	}
}

// TestReadOutputRefuses checks what read_output says of a call it cannot read.
func TestReadOutputRefuses(t *testing.T) {
	dump := &fakeTool{name: "dump", readOnly: true, fn: func(context.Context, json.RawMessage) (string, error) { return "short", nil }}
	llm := newLLM(t,
		calls(call("dump", `{}`)),
		calls(call("read_output", `{"call_id":"nope"}`)),
		calls(call("read_output", `{"call_id":"call_1_0","offset":99}`)),
		calls(call("read_output", `{"call_id":"call_1_0","offset":2,"length":2}`)),
		text("done"))
	r := newRun(t, newAgent(t, llm.model, agent.Config{}, []agent.Tool{dump}), "read")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	for i, want := range map[int]string{
		2: `no finished call "nope" in this run`,
		3: "offset 99 is past the end of dump's result, which has 5 bytes",
		4: "[bytes 2 to 4 of 5 of the result of dump (call call_1_0); offset 4 continues]\nor",
	} {
		if !llm.sawToolResult(i, want) {
			t.Errorf("request %d lacks %q", i, want)
		}
	}
}

// atoi reads a number the regexps above matched as digits; it runs in the model server's
// goroutine, so it reports rather than stops the test.
func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Error(err)
	}
	return n
}

func tailOf(s string, n int) string { return s[max(0, len(s)-n):] }

// TestExecutorReadsItsOutput checks that an executor of a planned run, which works on a
// sub-run of its own, reads the cut part of its own call's output with read_output.
func TestExecutorReadsItsOutput(t *testing.T) {
	full := strings.Repeat("abcdefghij", 500)
	full = full[:1000] + "THE MIDDLE" + full[1010:]
	dump := &fakeTool{name: "dump", readOnly: true, fn: func(context.Context, json.RawMessage) (string, error) { return full, nil }}
	c := newCrew(t,
		[]step{planJSON(planStep("s1", "dump it", agent.ScopeReadOnly)), accept()},
		map[string][]step{"s1": {calls(call("dump", `{}`)), text("the middle says THE MIDDLE")}})
	// The executor's call IDs carry its sub-run's prefix: it reads the one the marker names.
	scripted := c.exec.route
	c.exec.route = func(req agent.Request) step {
		if m := cutRE.FindStringSubmatch(lastContent(req)); m != nil {
			return calls(call("read_output", fmt.Sprintf(`{"call_id":%q,"offset":%s,"length":10}`, m[1], m[2])))
		}
		return scripted(req)
	}
	r := newRun(t, c.agent(agent.Config{OutputCap: 2000}, dump), "dump it")
	r.advance()
	r.wantStatus(agent.StatusCompleted)
	reqs := c.execRequests("s1")
	if len(reqs) != 3 {
		t.Fatalf("%d executor requests, want 3", len(reqs))
	}
	if first := lastContent(reqs[1]); strings.Contains(first, "THE MIDDLE") || !cutRE.MatchString(first) {
		t.Errorf("the executor was shown %.120q, want the output capped around its middle", first)
	}
	if read := lastContent(reqs[2]); !regexp.MustCompile(`\[bytes 1000 to 1010 of 5000 of the result of dump \(call [^)]*call_1_0\); offset 1010 continues\]\nTHE MIDDLE`).MatchString(read) {
		t.Errorf("read_output answered the executor %.200q", read)
	}
}

// lastContent is the content of a request's last message.
func lastContent(req agent.Request) string { return req.Messages[len(req.Messages)-1].Content }
