package llm

import (
	"math"
	"slices"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/loopbot/loopbot/agent"
)

// accumulator builds one reply from the chunks of a stream. Only the first choice counts:
// the client never asks for more than one.
//
// Tool calls are gathered by their index: a call's first delta carries its ID and name, the
// following ones pieces of its arguments, and the deltas of parallel calls may interleave.
// Some servers omit the index; their deltas go to the call with the same ID, or to a new
// call when an unseen ID arrives, or else to the call that was last added.
type accumulator struct {
	content strings.Builder
	refusal strings.Builder
	calls   map[int]*partialCall
	// lastIndex is the index of the call added last, for deltas that have neither an index
	// nor an ID.
	lastIndex int
	// maxIndex is the highest index in calls, where a new call without an index goes.
	maxIndex int
	finish   string
	usage    *openai.Usage
}

type partialCall struct {
	id, name string
	args     strings.Builder
}

func (a *accumulator) add(chunk openai.ChatCompletionStreamResponse) {
	if chunk.Usage != nil {
		a.usage = chunk.Usage
	}
	for _, ch := range chunk.Choices {
		if ch.Index != 0 {
			continue
		}
		a.content.WriteString(ch.Delta.Content)
		a.refusal.WriteString(ch.Delta.Refusal)
		for _, d := range ch.Delta.ToolCalls {
			a.addCall(d)
		}
		if ch.FinishReason != "" && ch.FinishReason != openai.FinishReasonNull {
			a.finish = string(ch.FinishReason)
		}
	}
}

func (a *accumulator) addCall(d openai.ToolCall) {
	if a.calls == nil {
		a.calls = map[int]*partialCall{}
	}
	idx, ok := a.callIndex(d)
	switch {
	case ok:
	case len(a.calls) == 0:
		idx = 0
	case a.maxIndex < math.MaxInt:
		idx = a.maxIndex + 1
	default:
		// No index is left above the others; the delta joins the last call rather than
		// being lost.
		idx = a.lastIndex
	}
	c := a.calls[idx]
	if c == nil {
		c = &partialCall{}
		a.calls[idx] = c
		a.lastIndex = idx
		if len(a.calls) == 1 || idx > a.maxIndex {
			a.maxIndex = idx
		}
	}
	// Some servers repeat the ID and name in every delta; the first ones stand.
	if c.id == "" {
		c.id = d.ID
	}
	if c.name == "" {
		c.name = d.Function.Name
	}
	c.args.WriteString(d.Function.Arguments)
}

// callIndex finds the call a delta belongs to; false means a new call.
func (a *accumulator) callIndex(d openai.ToolCall) (int, bool) {
	if d.Index != nil {
		return *d.Index, true
	}
	if d.ID != "" {
		for i, c := range a.calls {
			if c.id == d.ID {
				return i, true
			}
		}
		return 0, false
	}
	if len(a.calls) == 0 {
		return 0, false
	}
	return a.lastIndex, true
}

// reply is what the stream said, in the order of the calls' indexes. A stream without a
// finish reason was cut short.
func (a *accumulator) reply() (agent.Reply, error) {
	if a.finish == "" {
		return agent.Reply{}, errIncompleteStream
	}
	msg := agent.Message{Role: agent.RoleAssistant, Content: a.content.String()}
	if msg.Content == "" {
		msg.Content = a.refusal.String()
	}
	idx := make([]int, 0, len(a.calls))
	for i := range a.calls {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	for _, i := range idx {
		c := a.calls[i]
		msg.ToolCalls = append(msg.ToolCalls, agent.ToolCall{ID: c.id, Name: c.name, Arguments: c.args.String()})
	}
	return agent.Reply{Message: msg, FinishReason: a.finish}, nil
}
