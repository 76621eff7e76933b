package agent

import (
	"encoding/json"
	"fmt"
	"strings"
)

// A tool output enters the conversation capped at Config.OutputCap bytes: its head and its
// tail, with one line between them that says how many bytes were cut and how to read them.
// The whole output stays in the run's CallRecord, and the read_output tool reads any part of
// it by offset, so nothing is lost and nothing the model was sent is rewritten to make room.
//
// This is what lets the prompt cache work. A request shares with the one before it all but
// what is new since, so its cached share is about 1 - new/size. Cutting old outputs in
// blocks (context.go) keeps the size down but cannot shrink what each step adds: with a
// whole 8 KB output entering every step and prompts a third the size of the full history's,
// no schedule of cuts reaches a cached share of 0.8. Capping what enters does. The head and
// the tail are what usually matter (the start of a listing or a page, the error and the exit
// status at the end), which is also what Codex CLI keeps of a command's output.

const readOutputName = "read_output"

// minOutputCap is the smallest cap a config may set: below it the line that stands for the
// cut bytes would be most of what the model is shown.
const minOutputCap = 256

// readOutputMax bounds one read_output reply when capping is turned off.
const readOutputMax = 16 << 10

// capOutput returns s as it enters the conversation: whole when it is at most limit bytes,
// else its first and last limit/2 bytes (moved back to a line break near the cut, and never
// inside a UTF-8 sequence) around a line that names the bytes cut and the call to read them
// from. It depends on nothing but its arguments, so a prompt built again shows the same bytes.
func capOutput(s string, limit int, callID string) string {
	if limit <= 0 || len(s) <= limit {
		return s
	}
	head, tail := headTail(s, limit)
	return s[:head] + capMarker(head, tail, len(s), callID) + s[tail:]
}

// headTail returns where the kept head of s ends and the kept tail starts, for a cap of
// limit bytes: the head is at most limit/2 bytes and the tail at most the rest. Each cut is
// moved to a line break when one lies within a quarter of its part, so that whole lines are
// shown, and otherwise to the start of a UTF-8 sequence.
func headTail(s string, limit int) (head, tail int) {
	h := limit / 2
	t := limit - h
	head = runeStart(s, h)
	if i := strings.LastIndexByte(s[:head], '\n'); i >= 0 && head-(i+1) <= h/4 {
		head = i + 1
	}
	tail = len(s) - t
	for tail < len(s) && s[tail]&0xC0 == 0x80 {
		tail++
	}
	if tail > 0 && s[tail-1] != '\n' {
		if j := strings.IndexByte(s[tail:], '\n'); j >= 0 && j+1 <= t/4 {
			tail += j + 1
		}
	}
	return head, max(head, tail)
}

// capMarker is the line that stands for the bytes of a capped output between head and tail.
func capMarker(head, tail, total int, callID string) string {
	return fmt.Sprintf("\n[... %d bytes cut here, bytes %d to %d of %d: read_output with call_id %q and offset %d shows them ...]\n",
		tail-head, head, tail, total, callID, head)
}

// runeStart is i moved back to the start of the UTF-8 sequence it falls in, so that s[:i]
// never ends inside a character; i is at most len(s).
func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && s[i]&0xC0 == 0x80 {
		i--
	}
	return i
}

// outputCap is the cap in force, zero when capping is off.
func (a *Agent) outputCap() int { return max(a.cfg.OutputCap, 0) }

func readOutputTool() Tool {
	return controlTool{ToolInfo{Spec: ToolSpec{
		Name: readOutputName,
		Description: "Read part of an earlier tool result in full. Long results are shown with their middle cut, and older " +
			"results are shortened as the conversation grows; the line that says so gives the call_id and the offset to read from.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"call_id":{"type":"string","minLength":1,"maxLength":200},` +
			`"offset":{"type":"integer","minimum":0},"length":{"type":"integer","minimum":1}},` +
			`"required":["call_id"],"additionalProperties":false}`),
	}, ReadOnly: true, Idempotent: true, Untrusted: true}}
}

// readOutput answers a read_output call from the run's own record of the call it names: the
// bytes from offset, at most the cap (or length, when that is smaller), with a line that
// says where they are and where the next part starts. It reads the state and changes
// nothing, so parallel calls of a step may run it together.
func (r *runner) readOutput(args string) callResult {
	var in struct {
		CallID string `json:"call_id"`
		Offset int    `json:"offset"`
		Length int    `json:"length"`
	}
	if err := json.Unmarshal([]byte(args), &in); err != nil {
		return callResult{err: fmt.Errorf("read_output: %w", err)}
	}
	c := r.st.Call(in.CallID)
	if c == nil || !c.Status.Done() || c.Name == readOutputName {
		return callResult{err: fmt.Errorf("read_output: no finished call %q in this run (read_output's own results are not kept apart)", in.CallID)}
	}
	full := toolContent(c)
	if in.Offset > len(full) {
		return callResult{err: fmt.Errorf("read_output: offset %d is past the end of %s's result, which has %d bytes", in.Offset, c.Name, len(full))}
	}
	room := readOutputMax
	if limit := r.a.outputCap(); limit > 0 {
		room = limit
	}
	if in.Length > 0 {
		room = min(room, in.Length)
	}
	start := runeStart(full, in.Offset)
	end := max(start, runeStart(full, min(in.Offset+room, len(full))))
	var b strings.Builder
	fmt.Fprintf(&b, "[bytes %d to %d of %d of the result of %s (call %s)", start, end, len(full), c.Name, c.ID)
	if end < len(full) {
		fmt.Fprintf(&b, "; offset %d continues", end)
	}
	b.WriteString("]\n")
	b.WriteString(full[start:end])
	return callResult{out: b.String()}
}
