package store

import (
	"encoding/json"
	"reflect"
	"strings"
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

// TestNoOtherStateKeyInAHead guards recordData's premise that the first "state":null of a
// head's bytes is the record's own state: no field encoded before or after it, at any depth,
// may be named "state", and none may be a map, whose keys could spell it. A field added to
// bot.RunRecord, bot.ThreadRef or the others that breaks this fails here, not on disk.
func TestNoOtherStateKeyInAHead(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(path string, typ reflect.Type)
	walk = func(path string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array {
			typ = typ.Elem()
		}
		if typ.Kind() == reflect.Map {
			t.Errorf("%s is a map: its keys could spell \"state\":null", path)
			return
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ == reflect.TypeFor[time.Time]() {
			return
		}
		seen[typ] = true
		for f := range typ.Fields() {
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if name == "state" {
				t.Errorf("%s.%s is encoded as \"state\"", path, f.Name)
			}
			walk(path+"."+f.Name, f.Type)
		}
	}
	rec := reflect.TypeFor[bot.RunRecord]()
	for f := range rec.Fields() {
		if f.Name == "State" || !f.IsExported() {
			continue
		}
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == "-" {
			continue
		}
		walk("RunRecord."+f.Name, f.Type)
	}
}
