package store

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// reuseState is a state after steps steps: each an assistant message with a call, the
// tool's message, and the call's record with its times and a decision.
func reuseState(steps int) *agent.State {
	now := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	st := agent.NewState("run-1", "read every file", nil, now)
	st.Status = agent.StatusRunning
	for i := range steps {
		id := fmt.Sprintf("call-%d", i)
		args := fmt.Sprintf(`{"path":"file-%d.txt"}`, i)
		st.Messages = append(st.Messages,
			agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: id, Name: "read_file", Arguments: args}}},
			agent.Message{Role: agent.RoleTool, ToolCallID: id, Name: "read_file", Content: "line of file\n"})
		st.Calls = append(st.Calls, agent.CallRecord{ID: id, Step: i + 1, Name: "read_file", Arguments: args,
			Status: agent.CallSucceeded, Output: "line of file\n", Reported: true, StartedAt: now, FinishedAt: now.Add(time.Second),
			Decision: &agent.Decision{Approved: true, By: "U1", At: now}, GrantedBy: &agent.GrantUse{ID: "g1", By: "U2"}})
		st.Step = i + 1
	}
	return st
}

// TestEncodeStateReusesWhatDidNotChange checks that an encoding given the run's last one
// reuses the bytes of every item that is the same, and that whatever changed an item in
// place since (a status, a decision, a grant, a tool call's arguments, a message's text)
// is encoded again: the bytes are those of an encoding made afresh.
func TestEncodeStateReusesWhatDidNotChange(t *testing.T) {
	changes := []struct {
		name   string
		change func(st *agent.State)
		// msg and call are the indexes of the items changed, -1 for none.
		msg, call int
	}{
		{"nothing", func(st *agent.State) {}, -1, -1},
		{"a call's status", func(st *agent.State) { st.Calls[1].Status = agent.CallFailed }, -1, 1},
		{"a call's decision", func(st *agent.State) { st.Calls[0].Decision.Approved = false }, -1, 0},
		{"a call's grant", func(st *agent.State) { st.Calls[2].GrantedBy.By = "U3" }, -1, 2},
		{"a call's time", func(st *agent.State) { st.Calls[2].FinishedAt = st.Calls[2].FinishedAt.Add(time.Second) }, -1, 2},
		{"a tool call's arguments", func(st *agent.State) { st.Messages[3].ToolCalls[0].Arguments = `{}` }, 3, -1},
		{"a message's text", func(st *agent.State) { st.Messages[2].Content = "another line\n" }, 2, -1},
	}
	for _, tt := range changes {
		t.Run(tt.name, func(t *testing.T) {
			st := reuseState(3)
			prev, err := encodeState(st, nil)
			if err != nil {
				t.Fatal(err)
			}
			tt.change(st)
			// The next step, as a checkpoint sees it.
			st.Messages = append(st.Messages, agent.Message{Role: agent.RoleAssistant, Content: "done"})
			got, err := encodeState(st, prev)
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := encodeState(st, nil)
			if err != nil {
				t.Fatal(err)
			}
			check := func(kind string, got, fresh, prev [][]byte, changed int) {
				t.Helper()
				if len(got) != len(fresh) {
					t.Fatalf("%d %s encoded, want %d", len(got), kind, len(fresh))
				}
				for i := range got {
					if !bytes.Equal(got[i], fresh[i]) {
						t.Errorf("%s %d is %s, want %s", kind, i, got[i], fresh[i])
					}
					reused := i < len(prev) && len(got[i]) > 0 && &got[i][0] == &prev[i][0]
					if want := i < len(prev) && i != changed; reused != want {
						t.Errorf("%s %d reused: %v, want %v", kind, i, reused, want)
					}
				}
			}
			check("message", got.msgs, fresh.msgs, prev.msgs, tt.msg)
			check("call", got.calls, fresh.calls, prev.calls, tt.call)
		})
	}
}

// TestSameItemsSeeEveryField checks that the compares of items see a change of any field:
// a field added to Message or CallRecord and left out of them would let a checkpoint store
// the item as it was before the change.
func TestSameItemsSeeEveryField(t *testing.T) {
	msg := agent.Message{Role: agent.RoleAssistant, Content: "c", ToolCalls: []agent.ToolCall{{ID: "i", Name: "n", Arguments: "{}"}}, ToolCallID: "t", Name: "n"}
	call := reuseState(1).Calls[0]
	everyField(t, "Message", msg, sameMessage)
	everyField(t, "CallRecord", call, sameCall)
}

// everyField changes each field of base in turn (and each field of what a pointer field
// points at) and checks that same tells the change.
func everyField[T any](t *testing.T, name string, base T, same func(a, b *T) bool) {
	t.Helper()
	if b := base; !same(&base, &b) {
		t.Fatalf("%s: a copy is not the same", name)
	}
	v := reflect.ValueOf(base)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		changed := reflect.New(v.Type()).Elem()
		changed.Set(v)
		target := changed.Field(i)
		if target.Kind() == reflect.Pointer {
			if target.IsNil() {
				t.Fatalf("%s.%s is nil in the base; give it a value", name, f.Name)
			}
			pointee := reflect.New(target.Elem().Type())
			pointee.Elem().Set(target.Elem())
			target.Set(pointee)
			for j := range pointee.Elem().NumField() {
				inner := reflect.New(pointee.Elem().Type()).Elem()
				inner.Set(target.Elem())
				alter(t, name+"."+f.Name+"."+pointee.Elem().Type().Field(j).Name, inner.Field(j))
				copied := reflect.New(v.Type()).Elem()
				copied.Set(changed)
				p := reflect.New(inner.Type())
				p.Elem().Set(inner)
				copied.Field(i).Set(p)
				c := copied.Interface().(T)
				if same(&base, &c) {
					t.Errorf("%s: a change of %s.%s is not seen", name, f.Name, pointee.Elem().Type().Field(j).Name)
				}
			}
			continue
		}
		alter(t, name+"."+f.Name, target)
		c := changed.Interface().(T)
		if same(&base, &c) {
			t.Errorf("%s: a change of %s is not seen", name, f.Name)
		}
	}
}

// alter sets v to another value of its type.
func alter(t *testing.T, what string, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Slice:
		if v.Len() == 0 {
			t.Fatalf("%s is empty in the base; give it an element", what)
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(c, v)
		alter(t, what+"[0]", c.Index(0).Field(0))
		v.Set(c)
	case reflect.Struct:
		if tm, ok := v.Interface().(time.Time); ok {
			v.Set(reflect.ValueOf(tm.Add(time.Second)))
			return
		}
		t.Fatalf("%s: no way to change a %s", what, v.Type())
	default:
		t.Fatalf("%s: no way to change a %s", what, v.Kind())
	}
}

// TestEncodingKeepsItemsOfASmallStateOnly checks that an encoding keeps copies of its items
// for the next only while they are small: a run with long outputs would otherwise hold
// them twice as long as it is in flight.
func TestEncodingKeepsItemsOfASmallStateOnly(t *testing.T) {
	st := reuseState(3)
	small, err := encodeState(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(small.msgVals) != len(st.Messages) || len(small.callVals) != len(st.Calls) {
		t.Errorf("a small state kept %d messages and %d calls, want %d and %d", len(small.msgVals), len(small.callVals), len(st.Messages), len(st.Calls))
	}
	st.Calls[0].Output = strings.Repeat("x", maxKeptEncoding)
	big, err := encodeState(st, small)
	if err != nil {
		t.Fatal(err)
	}
	if big.msgVals != nil || big.callVals != nil {
		t.Errorf("a state over %d bytes kept %d messages and %d calls", maxKeptEncoding, len(big.msgVals), len(big.callVals))
	}
	// Once too big, it makes no copies to throw away at the next checkpoint.
	st.Step++
	next, err := encodeState(st, big)
	if err != nil {
		t.Fatal(err)
	}
	if next.kept || next.msgVals != nil {
		t.Errorf("the next encoding of a state over %d bytes kept %d messages", maxKeptEncoding, len(next.msgVals))
	}
	withCopies := testing.AllocsPerRun(10, func() { encodeState(st, nil) })
	without := testing.AllocsPerRun(10, func() { encodeState(st, big) })
	if without >= withCopies {
		t.Errorf("encoding a big state after one that kept nothing took %.0f allocations, want fewer than the %.0f of one that makes copies", without, withCopies)
	}
}
