package agent_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

var stateType = reflect.TypeFor[agent.State]()

// fill sets every field reachable from v to a value made from seed, in place: it reuses the
// slices, maps and pointers v already has, as the loop changes a state, and makes them (of
// one element) where v has none. States nest (a plan step's Sub) two deep.
func fill(t *testing.T, v reflect.Value, seed, states int) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", seed))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(seed))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(seed))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(seed))
	case reflect.Bool:
		v.SetBool(seed%2 == 1)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(int64(seed), 0).UTC()))
			return
		}
		if v.Type() == stateType {
			states++
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				t.Fatalf("%s.%s is unexported: Snapshot cannot be checked to copy it", v.Type(), f.Name)
			}
			fill(t, v.Field(i), seed, states)
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		}
		for i := range v.Len() {
			fill(t, v.Index(i), seed, states)
		}
	case reflect.Map:
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		k := reflect.New(v.Type().Key()).Elem()
		fill(t, k, 1, states) // the same key every time: its value changes in place
		e := reflect.New(v.Type().Elem()).Elem()
		fill(t, e, seed, states)
		v.SetMapIndex(k, e)
	case reflect.Pointer:
		if v.Type().Elem() == stateType && states >= 2 {
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(t, v.Elem(), seed, states)
	default:
		t.Fatalf("fill: a field of kind %s (%s) is not handled", v.Kind(), v.Type())
	}
}

// diff returns the path of the first value that differs between a and b, "" when none does.
func diff(a, b reflect.Value, path string) string {
	if a.Kind() != b.Kind() {
		return path
	}
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return path
			}
			return ""
		}
		return diff(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		if a.Type() == reflect.TypeFor[time.Time]() {
			if !a.Interface().(time.Time).Equal(b.Interface().(time.Time)) {
				return path
			}
			return ""
		}
		for i := range a.NumField() {
			if p := diff(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
				return p
			}
		}
		return ""
	case reflect.Slice:
		if a.Len() != b.Len() {
			return path
		}
		for i := range a.Len() {
			if p := diff(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
		return ""
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return path
	}
	return ""
}

// TestSnapshotSharesNothing fills every field of a state, nested plan states included,
// snapshots it, and changes every field of the state in place: the snapshot must still hold
// what the state held. A field added to State (or to anything it holds) that Snapshot shares
// fails here.
func TestSnapshotSharesNothing(t *testing.T) {
	st := &agent.State{}
	fill(t, reflect.ValueOf(st).Elem(), 1, 0)
	snap := st.Snapshot()
	want := &agent.State{}
	fill(t, reflect.ValueOf(want).Elem(), 1, 0)
	if p := diff(reflect.ValueOf(snap), reflect.ValueOf(want), "State"); p != "" {
		t.Fatalf("the snapshot differs from the state it was taken of at %s", p)
	}
	fill(t, reflect.ValueOf(st).Elem(), 2, 0)
	if p := diff(reflect.ValueOf(st), reflect.ValueOf(want), "State"); p == "" {
		t.Fatal("the state did not change")
	}
	if p := diff(reflect.ValueOf(snap), reflect.ValueOf(want), "State"); p != "" {
		t.Errorf("changing the state in place changed its snapshot at %s", p)
	}
	if (*agent.State)(nil).Snapshot() != nil {
		t.Error("the snapshot of no state is not nil")
	}
}

// TestSnapshotKeepsEmptyAndNil: a nil slice stays nil and an empty one empty, since the
// encoding tells them apart (omitzero).
func TestSnapshotKeepsEmptyAndNil(t *testing.T) {
	st := &agent.State{AllowedTools: []string{}, Messages: []agent.Message{{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{}}}}
	snap := st.Snapshot()
	if snap.AllowedTools == nil || snap.Messages[0].ToolCalls == nil {
		t.Error("an empty slice became nil")
	}
	if snap.Calls != nil || snap.Pinned != nil || snap.ToolFailures != nil {
		t.Error("a nil slice or map became empty")
	}
}
