package agent

import (
	"maps"
	"slices"
)

// Snapshot returns a copy of st that shares nothing the loop changes in place: every slice,
// map and pointer is copied, down to the states of a plan's steps. Strings are shared, since
// they cannot change. A checkpoint written while the loop goes on (Hooks.SaveAhead) reads
// the snapshot, so that the loop may change st meanwhile.
//
// It copies field by field, without encoding, because it is taken at every step boundary;
// TestSnapshotSharesNothing fails for a field of State added without a copy here.
func (st *State) Snapshot() *State {
	if st == nil {
		return nil
	}
	cp := *st
	cp.Messages = cloneMessages(st.Messages)
	cp.Pinned = slices.Clone(st.Pinned)
	cp.Plan = slices.Clone(st.Plan)
	cp.Calls = slices.Clone(st.Calls)
	for i := range cp.Calls {
		cp.Calls[i].Decision = clonePtr(cp.Calls[i].Decision)
		cp.Calls[i].GrantedBy = clonePtr(cp.Calls[i].GrantedBy)
	}
	cp.ToolFailures = maps.Clone(st.ToolFailures)
	cp.Recent = slices.Clone(st.Recent)
	cp.Outputs = slices.Clone(st.Outputs)
	cp.Summaries = maps.Clone(st.Summaries)
	cp.AllowedTools = slices.Clone(st.AllowedTools)
	cp.Reviews = slices.Clone(st.Reviews)
	cp.Planning = st.Planning.snapshot()
	cp.Grants = slices.Clone(st.Grants)
	cp.Pause = clonePtr(st.Pause)
	return &cp
}

// cloneMessages copies msgs and their tool calls, all of the calls in one allocation.
func cloneMessages(msgs []Message) []Message {
	if msgs == nil {
		return nil
	}
	cp := slices.Clone(msgs)
	n := 0
	for _, m := range msgs {
		n += len(m.ToolCalls)
	}
	calls := make([]ToolCall, 0, n)
	for i, m := range msgs {
		if m.ToolCalls == nil {
			continue
		}
		start := len(calls)
		calls = append(calls, m.ToolCalls...)
		cp[i].ToolCalls = calls[start:len(calls):len(calls)]
	}
	return cp
}

func (p *Planning) snapshot() *Planning {
	if p == nil {
		return nil
	}
	cp := *p
	cp.Steps = slices.Clone(p.Steps)
	for i := range cp.Steps {
		cp.Steps[i].DependsOn = slices.Clone(cp.Steps[i].DependsOn)
		cp.Steps[i].Sub = cp.Steps[i].Sub.Snapshot()
	}
	cp.Conversation = slices.Clone(p.Conversation)
	return &cp
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	cp := *p
	return &cp
}
