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
