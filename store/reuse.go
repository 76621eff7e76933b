package store

import (
	"slices"

	"github.com/loopbot/loopbot/agent"
)

// Reusing the encodings of a state's unchanged items.
//
// A checkpoint encodes the run's state in the run's goroutine (encoded.go), and at every
// step all but the newest of its messages and calls are what they were at the step
// before. Encoding each again was most of EncodeState's work, and in the makespan scenario
// (a thousand runs checkpointing six times each) most of its allocations: every call has
// two times, which encoding/json writes through their MarshalJSON and then compacts. So an
// encoding keeps a copy of each item as it was encoded, and the next encoding of the same
// run reuses an item's bytes while the item is the same. The copies share the items'
// strings, and a compare of two strings that share their bytes is a compare of pointers.
// Items are compared whole, whatever changed them: a call's status set in place, a
// decision given, a message's content rewritten.

// maxKeptEncoding bounds the encoded items whose copies an encoding keeps for the next:
// the scheduler holds each run's last encoding while the run is in flight, and a run with
// long outputs would hold them twice. Past it the next checkpoint encodes every item
// again, as before there was reuse.
const maxKeptEncoding = 16 << 10

// items are a list's copies as they were encoded, each with its encoding, and the
// encodings' total size. A copy is shared by the encodings that reuse it.
type items[T any] struct {
	vals []*T
	data [][]byte
	size int
}

// sameMessage reports whether a and b encode alike. TestSameItemsSeeEveryField fails when
// a field is added to Message and not compared here.
func sameMessage(a, b *agent.Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID && a.Name == b.Name &&
		slices.Equal(a.ToolCalls, b.ToolCalls)
}

// keepMessage copies m so that a change to the caller's tool calls does not change it.
func keepMessage(m agent.Message) *agent.Message {
	m.ToolCalls = slices.Clone(m.ToolCalls)
	return &m
}

// sameCall reports whether a and b encode alike: their pointers' targets compared, and
// the rest as values, which takes in any field added to CallRecord (and stops compiling
// when one cannot be compared so).
func sameCall(a, b *agent.CallRecord) bool {
	if !sameTarget(a.Decision, b.Decision) || !sameTarget(a.GrantedBy, b.GrantedBy) {
		return false
	}
	x, y := *a, *b
	x.Decision, y.Decision, x.GrantedBy, y.GrantedBy = nil, nil, nil, nil
	return x == y
}

// keepCall copies c so that a change to the caller's decision or grant does not change it.
func keepCall(c agent.CallRecord) *agent.CallRecord {
	if c.Decision != nil {
		d := *c.Decision
		c.Decision = &d
	}
	if c.GrantedBy != nil {
		g := *c.GrantedBy
		c.GrantedBy = &g
	}
	return &c
}

// sameTarget reports whether a and b point at equal values, or are both nil.
func sameTarget[T comparable](a, b *T) bool {
	return a == b || a != nil && b != nil && *a == *b
}
