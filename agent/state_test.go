package agent

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleState() *State {
	now := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)
	st := NewState("run-1", "deploy the thing", []Message{
		{Role: RoleUser, Content: "earlier goal"},
		{Role: RoleAssistant, Content: "earlier answer"},
	}, now)
	st.Status = StatusAwaitingApproval
	st.Step = 2
	st.Plan = []PlanItem{{Step: "look", Status: PlanDone}, {Step: "act", Status: PlanInProgress}}
	st.Messages = append(st.Messages, Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "shell", Arguments: `{"cmd":"rm -rf /tmp/x"}`}}})
	st.Calls = []CallRecord{{
		ID: "c1", Step: 2, Name: "shell", Arguments: `{"cmd":"rm -rf /tmp/x"}`, ArgsHash: HashArgs("shell", `{"cmd":"rm -rf /tmp/x"}`),
		Risk: RiskDangerous, RiskReason: "deletes files", Status: CallAwaitingApproval,
		Decision:  &Decision{Approved: false, By: "U1", Reason: "no", At: now},
		StartedAt: now, FinishedAt: now.Add(time.Second), Attempts: 1,
	}}
	st.Usage = Usage{PromptTokens: 100, CompletionTokens: 20, CachedTokens: 5, Cost: 0.0012, Calls: 2}
	st.Active = 1500 * time.Millisecond
	st.ToolFailures = map[string]int{"http_fetch": 1}
	st.RepeatedCall = Streak{Key: "k", Count: 2}
	st.Summaries = map[string]string{"c0": "summary"}
	st.Pause = &Pause{Kind: PauseApproval, Reason: "1 call needs approval"}
	st.Pinned = []string{"prod is eu-west-1"}
	return st
}

func TestStateJSONRoundTrip(t *testing.T) {
	st := sampleState()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalState(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Errorf("round trip changed the state:\n got %+v\nwant %+v", got, st)
	}
	b2, _ := json.Marshal(got)
	if !bytes.Equal(b, b2) {
		t.Errorf("re-encoding differs:\n%s\n%s", b, b2)
	}
}

func TestUnmarshalStateRejects(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"not json", `{`, "decode run state"},
		{"future version", `{"version":99,"run_id":"r","status":"running"}`, "version 99 not supported"},
		{"no id", `{"version":1,"status":"running"}`, "no run id"},
		{"bad status", `{"version":1,"run_id":"r","status":"dancing"}`, "unknown status"},
		{"paused without reason", `{"version":1,"run_id":"r","status":"awaiting_input"}`, "no pause reason"},
		{"duplicate call", `{"version":1,"run_id":"r","status":"running","calls":[{"id":"a"},{"id":"a"}]}`, "repeated call id"},
		{"bad risk", `{"version":1,"run_id":"r","status":"running","calls":[{"id":"a","risk":"spicy"}]}`, "unknown risk level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := UnmarshalState([]byte(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestDecideAndRespond(t *testing.T) {
	st := sampleState()
	st.Calls[0].Decision = nil
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := st.Decide("nope", Decision{Approved: true, By: "U2", At: now}); err == nil {
		t.Error("deciding an unknown call succeeded")
	}
	if err := st.Decide("c1", Decision{Approved: false, By: "U2", Reason: "too risky", At: now}); err != nil {
		t.Fatal(err)
	}
	if st.Status != StatusRunning || st.Pause != nil {
		t.Errorf("after the last decision status = %s, pause = %v; want running and none", st.Status, st.Pause)
	}
	if c := st.Call("c1"); c.Status != CallRejected || !strings.Contains(c.Output, "too risky") {
		t.Errorf("rejected call = %+v", c)
	}
	if err := st.Decide("c1", Decision{Approved: true, By: "U3", At: now}); err == nil {
		t.Error("a second decision on the same call succeeded")
	}
	if err := st.Respond("hi", "U1"); err == nil {
		t.Error("responding to a run that does not wait for input succeeded")
	}
}

func TestCancel(t *testing.T) {
	st := sampleState()
	st.Calls = append(st.Calls, CallRecord{ID: "c2", Name: "shell", Status: CallStarted})
	if err := st.Cancel("stop it", time.Now()); err != nil {
		t.Fatal(err)
	}
	if st.Status != StatusCancelled || st.Call("c1").Status != CallRejected || st.Call("c2").Status != CallUnknown {
		t.Errorf("after cancel: status %s, calls %s %s", st.Status, st.Call("c1").Status, st.Call("c2").Status)
	}
	if err := st.Cancel("again", time.Now()); err == nil {
		t.Error("cancelling a cancelled run succeeded")
	}
}

func FuzzUnmarshalState(f *testing.F) {
	b, _ := json.Marshal(sampleState())
	f.Add(b)
	f.Add([]byte(`{"version":1,"run_id":"r","status":"running"}`))
	f.Add([]byte(`{"version":1,"run_id":"r","status":"awaiting_input","pause":{"kind":"ask_user"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := UnmarshalState(data)
		if err != nil {
			return
		}
		// A state that decodes must encode, and decode again to the same value.
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatalf("a decoded state does not encode: %v", err)
		}
		st2, err := UnmarshalState(b)
		if err != nil {
			t.Fatalf("re-decoding failed: %v", err)
		}
		b2, _ := json.Marshal(st2)
		if !bytes.Equal(b, b2) {
			t.Fatalf("encoding is not stable:\n%s\n%s", b, b2)
		}
		_ = st.Summary()
		_ = st.Progress()
	})
}

func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"a":1}`, `[1]`, `"x"`, `{"a":`, `{} {}`, `null`, `{"a":1e999}`} {
		f.Add(s)
	}
	sc, err := compileSchema(json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer","minimum":0}},"required":["a"]}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		obj, err := decodeArgs(raw)
		if err != nil {
			if obj != nil {
				t.Fatal("an error came with a value")
			}
			return
		}
		if obj == nil {
			t.Fatal("no error and no object")
		}
		_ = sc.validate(obj)
		_ = canonicalArgs(raw)
	})
}

func TestDecodeArgs(t *testing.T) {
	tests := []struct {
		raw     string
		wantErr string
	}{
		{``, ""},
		{`{"a":1}`, ""},
		{`[1,2]`, "want an object"},
		{`"x"`, "want an object"},
		{`null`, "want an object"},
		{`{"a":`, "the JSON ends before the object is closed"},
		{`{} {}`, "extra data"},
		{`not json`, "invalid character"},
	}
	for _, tt := range tests {
		_, err := decodeArgs(tt.raw)
		if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("decodeArgs(%q) err = %v, want %q", tt.raw, err, tt.wantErr)
		}
	}
	if a, b := canonicalArgs(`{"b":1, "a":2}`), canonicalArgs(`{"a":2,"b":1}`); a != b {
		t.Errorf("canonical forms differ: %s vs %s", a, b)
	}
}

func TestParseVerdict(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{`{"verdict":"on_track","note":""}`, "on_track", true},
		{"```json\n{\"verdict\":\"concerns\",\"note\":\"loops\"}\n```", "concerns", true},
		{`Sure! {"verdict":"should_pause","note":"stop"}`, "should_pause", true},
		{`{"verdict":"maybe"}`, "", false},
		{`garbage`, "", false},
	}
	for _, tt := range tests {
		v, ok := parseVerdict(tt.in)
		if ok != tt.ok || v.Verdict != tt.want {
			t.Errorf("parseVerdict(%q) = %+v, %v", tt.in, v, ok)
		}
	}
}

func TestTruncateKeepsRunes(t *testing.T) {
	s := strings.Repeat("é", 100)
	got := truncate(s, 51)
	if !strings.HasPrefix(got, strings.Repeat("é", 25)+"\n[...") {
		t.Errorf("truncate cut inside a rune: %q", got[:60])
	}
}
