package llm

import (
	"cmp"
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
// A delta whose ID differs from the one of the call at its index starts a new call: Ollama
// sends parallel calls whole, each in its own chunk, all at index 0 with distinct IDs.
// Some servers omit the index; their deltas go to the call with the same ID, or to a new
// call when an unseen ID arrives, or else to the call that was last added.
type accumulator struct {
	content strings.Builder
	refusal strings.Builder
	// calls are in the order they began.
	calls []*partialCall
	// byIndex maps an index to the position in calls of the latest call at that index,
	// which its deltas without a new ID continue.
	byIndex map[int]int
	// maxIndex is the highest index in byIndex, where a new call without an index goes.
	maxIndex int
	finish   string
	usage    *openai.Usage
	// err is the first error a chunk reported.
	err *ProviderError
}

type partialCall struct {
	// index is the index the call was given (or assigned, when it came without one).
	index    int
	id, name string
	args     strings.Builder
}

func (a *accumulator) add(ck chunk) {
	if ck.Usage != nil {
		a.usage = ck.Usage
	}
	if ck.Error != nil && a.err == nil {
		a.err = ck.Error.err()
	}
	for _, ch := range ck.Choices {
		if ch.Index != 0 {
			continue
		}
		a.content.WriteString(ch.Delta.Content)
		a.refusal.WriteString(ch.Delta.Refusal)
		for _, d := range ch.Delta.ToolCalls {
			a.addCall(d)
		}
		if ch.FinishReason != "" && ch.FinishReason != string(openai.FinishReasonNull) {
			a.finish = ch.FinishReason
		}
	}
}

func (a *accumulator) addCall(d toolCall) {
	if a.byIndex == nil {
		a.byIndex = map[int]int{}
	}
	var c *partialCall
	if d.Index != nil {
		if pos, ok := a.byIndex[*d.Index]; ok {
			c = a.calls[pos]
			if d.ID != "" && c.id != "" && d.ID != c.id {
				// A new ID at an occupied index is a new call, not more of the old one.
				c = nil
			}
		}
		if c == nil {
			c = a.newCall(*d.Index)
		}
	} else {
		c = a.callWithoutIndex(d.ID)
	}
	// Some servers repeat the ID and name in every delta; the first ones stand.
	if c.id == "" {
		c.id = d.ID
	}
	if c.name == "" {
		c.name = d.Function.Name
	}
	c.args.WriteString(string(d.Function.Arguments))
}

// callWithoutIndex finds the call a delta without an index belongs to: the call with its
// ID, a new call for an unseen ID, else the call added last.
func (a *accumulator) callWithoutIndex(id string) *partialCall {
	if id != "" {
		for _, c := range a.calls {
			if c.id == id {
				return c
			}
		}
	} else if len(a.calls) > 0 {
		return a.calls[len(a.calls)-1]
	}
	switch {
	case len(a.calls) == 0:
		return a.newCall(0)
	case a.maxIndex < math.MaxInt:
		return a.newCall(a.maxIndex + 1)
	default:
		// No index is left above the others; the call shares the highest.
		return a.newCall(a.maxIndex)
	}
}

// newCall starts a call at index i.
func (a *accumulator) newCall(i int) *partialCall {
	c := &partialCall{index: i}
	if len(a.byIndex) == 0 || i > a.maxIndex {
		a.maxIndex = i
	}
	a.byIndex[i] = len(a.calls)
	a.calls = append(a.calls, c)
	return c
}

// reply is what the stream said, in the order of the calls' indexes. A stream without a
// finish reason was cut short; a stream with an error chunk (OpenRouter sends one with
// finish_reason "error" when the provider fails mid-reply) ends in that error.
func (a *accumulator) reply() (agent.Reply, error) {
	if a.err != nil {
		// The provider's word on why the reply stopped; whatever came before it is not
		// the answer.
		return agent.Reply{}, a.err
	}
	if a.finish == "" {
		return agent.Reply{}, errIncompleteStream
	}
	msg := agent.Message{Role: agent.RoleAssistant, Content: a.content.String()}
	if msg.Content == "" {
		msg.Content = a.refusal.String()
	}
	// The calls are in the order of their indexes, and of their arrival at one index.
	calls := slices.Clone(a.calls)
	slices.SortStableFunc(calls, func(x, y *partialCall) int { return cmp.Compare(x.index, y.index) })
	for _, c := range calls {
		msg.ToolCalls = append(msg.ToolCalls, agent.ToolCall{ID: c.id, Name: c.name, Arguments: c.args.String()})
	}
	return agent.Reply{Message: msg, FinishReason: a.finish}, nil
}
