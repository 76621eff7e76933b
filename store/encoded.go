package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// Encoding a state ahead of its transaction.
//
// bbolt lets one writer in at a time, and the group commit (group.go) runs the functions
// of every run that checkpoints at the same moment one after another in that writer. A
// checkpoint's largest piece of work was encoding the run's state: its record and every
// message and call, to compare each with the stored one. EncodeState does that work in the
// run's own goroutine, before it queues, and PutRun then only compares and copies bytes.

// encodedState is a state encoded as PutRun stores it (bot.EncodedState).
type encodedState struct {
	st   *agent.State
	sign stateSign
	// rest is the state without its messages and calls (splitState), which the run's
	// record holds; msgs and calls are the run items, one encoding each.
	rest  json.RawMessage
	msgs  [][]byte
	calls [][]byte
	// msgVals and callVals are copies of the items as they were encoded, which a later
	// encoding of the state reuses the bytes of while an item is the same (reuse.go); nil
	// when the state is too big to keep them, and kept says they are there.
	msgVals  []*agent.Message
	callVals []*agent.CallRecord
	kept     bool
}

func (e *encodedState) Of() *agent.State { return e.st }

// stateSign holds the signs that a state changed after it was encoded: every step moves
// the step count or the lists' lengths, and every change the loop makes to a state it
// saves moves its update time.
type stateSign struct {
	step, msgs, calls int
	status            agent.Status
	updated           time.Time
}

func signOf(st *agent.State) stateSign {
	return stateSign{step: st.Step, msgs: len(st.Messages), calls: len(st.Calls), status: st.Status, updated: st.UpdatedAt}
}

// EncodeState encodes st as PutRun would (bot.StateEncoder), for the caller to do before
// it waits for the writer. prev, an earlier encoding this store made, lends the bytes of
// the items that did not change since.
func (db *DB) EncodeState(st *agent.State, prev bot.EncodedState) (bot.EncodedState, error) {
	if st == nil {
		return nil, fmt.Errorf("encode state: nil")
	}
	p, _ := prev.(*encodedState)
	return encodeState(st, p)
}

func encodeState(st *agent.State, prev *encodedState) (*encodedState, error) {
	rest, err := json.Marshal(splitState(st))
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	e := &encodedState{st: st, sign: signOf(st), rest: rest}
	// A state that was too big to keep copies of its items last time is too big now: its
	// items are encoded as they are, with no copies.
	keep := prev == nil || prev.kept
	var prevMsgs items[agent.Message]
	var prevCalls items[agent.CallRecord]
	if prev != nil {
		prevMsgs = items[agent.Message]{vals: prev.msgVals, data: prev.msgs}
		prevCalls = items[agent.CallRecord]{vals: prev.callVals, data: prev.calls}
	}
	msgs, err := encodeList(st.Messages, itemMessage, prevMsgs, sameMessage, keepMessage, keep)
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	calls, err := encodeList(st.Calls, itemCall, prevCalls, sameCall, keepCall, keep)
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	e.msgs, e.calls = msgs.data, calls.data
	if keep && msgs.size+calls.size <= maxKeptEncoding {
		e.msgVals, e.callVals, e.kept = msgs.vals, calls.vals, true
	}
	return e, nil
}

// encodeList encodes each element of list, the run items of kind, reusing the bytes of
// prev's elements that are the same. With keep set it keeps a copy of each element for
// the next encoding.
func encodeList[T any](list []T, kind byte, prev items[T], same func(a, b *T) bool, copyOf func(T) *T, keep bool) (items[T], error) {
	out := items[T]{data: make([][]byte, len(list))}
	if keep {
		out.vals = make([]*T, len(list))
	}
	for i := range list {
		if i < len(prev.vals) && same(prev.vals[i], &list[i]) {
			out.data[i] = prev.data[i]
			if keep {
				out.vals[i] = prev.vals[i]
			}
		} else {
			data, err := json.Marshal(&list[i])
			if err != nil {
				return items[T]{}, fmt.Errorf("item %c%d: %w", kind, i, err)
			}
			out.data[i] = data
			if keep {
				out.vals[i] = copyOf(list[i])
			}
		}
		out.size += len(out.data[i])
	}
	return out, nil
}

// encodingOf returns r.Encoded when it is this store's encoding of r.State as it is now,
// else r.State encoded afresh; nil for a run without a state.
func encodingOf(r *bot.RunRecord) (*encodedState, error) {
	if r.State == nil {
		return nil, nil
	}
	if e, ok := r.Encoded.(*encodedState); ok && e != nil && e.st == r.State && e.sign == signOf(r.State) {
		return e, nil
	}
	return encodeState(r.State, nil)
}

// runWire is a run's record as the runs bucket holds it, with its state already encoded:
// the outer State field hides the record's own.
type runWire struct {
	*bot.RunRecord
	State json.RawMessage `json:"state"`
}
