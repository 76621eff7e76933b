package store

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// TestRecordDataIsTheRecord checks that a run's record built from its head's bytes decodes
// to what encoding the whole record gives, with a state or none, when a text of the record
// spells the head's "state":null, and from a head that does not hold it.
func TestRecordDataIsTheRecord(t *testing.T) {
	now := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	st := agent.NewState("run-1", `goal with "state":null in it`, nil, now)
	st.Status = agent.StatusRunning
	st.Step = 3
	thread := bot.ThreadRef{Platform: "slack", Channel: "C1", Thread: "1"}
	base := bot.RunRecord{ID: "run-1", Thread: thread, Requester: bot.User{ID: "U1", Name: `"state":null`}, Status: agent.StatusRunning,
		Card: bot.MessageRef{Thread: thread, ID: "m1"}, PauseBy: `x","state":null,"y":"`, CreatedAt: now, UpdatedAt: now}
	enc, err := encodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		rest json.RawMessage
		head func(h []byte) []byte
	}{
		{"with a state", enc.rest, nil},
		{"without a state", nil, nil},
		{"a head without the state's null", enc.rest, func([]byte) []byte { return []byte(`{}`) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := base
			h := head(&rec)
			headData, err := json.Marshal(&h)
			if err != nil {
				t.Fatal(err)
			}
			if tt.head != nil {
				headData = tt.head(headData)
			}
			data, err := recordData(&rec, headData, tt.rest)
			if err != nil {
				t.Fatal(err)
			}
			rest := tt.rest
			if rest == nil {
				rest = json.RawMessage("null")
			}
			whole, err := json.Marshal(&runWire{RunRecord: &rec, State: rest})
			if err != nil {
				t.Fatal(err)
			}
			got, err := decode[bot.RunRecord](data, "built")
			if err != nil {
				t.Fatalf("decode %s: %v", data, err)
			}
			want, err := decode[bot.RunRecord](whole, "whole")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("record built from the head:\n%s\ndecodes to %+v\nwant %+v", data, got, want)
			}
		})
	}
}
