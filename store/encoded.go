package store

import (
	"bytes"
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
// it waits for the writer.
func (db *DB) EncodeState(st *agent.State) (bot.EncodedState, error) {
	if st == nil {
		return nil, fmt.Errorf("encode state: nil")
	}
	return encodeState(st)
}

func encodeState(st *agent.State) (*encodedState, error) {
	rest, err := json.Marshal(splitState(st))
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	msgs, err := encodeList(st.Messages, itemMessage)
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	calls, err := encodeList(st.Calls, itemCall)
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	return &encodedState{st: st, sign: signOf(st), rest: rest, msgs: msgs, calls: calls}, nil
}

// encodeList encodes each element of list, the run items of kind.
func encodeList[T any](list []T, kind byte) ([][]byte, error) {
	out := make([][]byte, len(list))
	for i := range list {
		data, err := json.Marshal(&list[i])
		if err != nil {
			return nil, fmt.Errorf("item %c%d: %w", kind, i, err)
		}
		out[i] = data
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
	return encodeState(r.State)
}

// runWire is a run's record as the runs bucket holds it, with its state already encoded:
// the outer State field hides the record's own.
type runWire struct {
	*bot.RunRecord
	State json.RawMessage `json:"state"`
}

// stateNull is how a head, whose State is nil, encodes its state.
var stateNull = []byte(`"state":null`)

// recordData is the runs value of rec, whose head encodes to headData, with the state
// encoded as rest (nil for none): the head's bytes with the state in place of its null.
// Encoding the record apart from its head, as PutRun did, encoded every field twice inside
// the one writer and had encoding/json check and compact the state's bytes again. Nothing
// else in a head can spell "state":null, since a quote inside a string is written \"; a
// head without it is encoded as a whole record.
func recordData(rec *bot.RunRecord, headData, rest json.RawMessage) ([]byte, error) {
	if rest == nil {
		rest = json.RawMessage("null")
	}
	i := bytes.Index(headData, stateNull)
	if i < 0 {
		return json.Marshal(&runWire{RunRecord: rec, State: rest})
	}
	at := i + len(`"state":`)
	data := make([]byte, 0, len(headData)-len("null")+len(rest))
	data = append(data, headData[:at]...)
	data = append(data, rest...)
	return append(data, headData[i+len(stateNull):]...), nil
}
