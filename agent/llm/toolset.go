package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync/atomic"

	openai "github.com/sashabaranov/go-openai"

	"github.com/loopbot/loopbot/agent"
)

// The tools of a request, translated once.
//
// The agent offers the same tools at every step of every run, and their specs (names,
// descriptions and JSON Schemas) were most of each request's body: in the makespan
// scenario 1.75 KB of a 2.6-3.4 KB body. Checking each schema, building go-openai's tools
// and encoding them again for every one of a thousand runs' steps was a third of what a
// request cost the client. A toolSet is that work done once for a list of specs; the
// client keeps the latest few and reuses one whose specs are the same.

// toolSet is a list of tool specs as a request carries them.
type toolSet struct {
	// specs are the specs the set was made from, kept to compare with a request's. Their
	// strings and schemas share the caller's memory, which the agent never changes, and a
	// compare of two that share it is a compare of pointers.
	specs []agent.ToolSpec
	// tools are go-openai's tools for specs; a request that uses the set refers to this
	// slice, which nothing changes once the set is made.
	tools []openai.Tool
	// body is the JSON of tools as encodeRequest writes it.
	body []byte
}

// keptToolSets is how many tool sets a client keeps: runs whose allowlists differ offer
// different sets, and the summarizer and planner none.
const keptToolSets = 8

// toolSets holds a client's latest tool sets, newest first. The slice is never changed
// once stored, so that concurrent requests can read it without a lock.
type toolSets struct{ latest atomic.Pointer[[]*toolSet] }

// get returns the set for specs, making it if no kept one matches.
func (ts *toolSets) get(specs []agent.ToolSpec) (*toolSet, error) {
	var kept []*toolSet
	if p := ts.latest.Load(); p != nil {
		kept = *p
	}
	for _, s := range kept {
		if sameSpecs(s.specs, specs) {
			return s, nil
		}
	}
	s, err := newToolSet(specs)
	if err != nil {
		return nil, err
	}
	next := make([]*toolSet, 0, keptToolSets)
	next = append(next, s)
	next = append(next, kept[:min(len(kept), keptToolSets-1)]...)
	ts.latest.Store(&next)
	return s, nil
}

// sameSpecs reports whether a and b offer the same tools in the same order.
func sameSpecs(a, b []agent.ToolSpec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description || !bytes.Equal(a[i].Parameters, b[i].Parameters) {
			return false
		}
	}
	return true
}

// newToolSet translates specs into go-openai's tools and encodes them.
func newToolSet(specs []agent.ToolSpec) (*toolSet, error) {
	s := &toolSet{specs: append([]agent.ToolSpec(nil), specs...), tools: make([]openai.Tool, 0, len(specs))}
	for _, t := range specs {
		params := t.Parameters
		if len(params) == 0 {
			params = defaultParameters
		} else if !json.Valid(params) {
			return nil, fmt.Errorf("tool %s: parameters are not valid JSON", t.Name)
		}
		s.tools = append(s.tools, openai.Tool{
			Type:     openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{Name: t.Name, Description: t.Description, Parameters: params},
		})
	}
	body, err := encodeTools(s.tools)
	if err != nil {
		return nil, err
	}
	s.body = body
	return s, nil
}

// encodeTools encodes tools as the "tools" member of a request body, refusing the fields
// wireTool does not carry.
func encodeTools(tools []openai.Tool) ([]byte, error) {
	w := make([]wireTool, 0, len(tools))
	for i, t := range tools {
		if len(t.Parameters) > 0 {
			return nil, fmt.Errorf("encode request: tool %d sets a field the client does not encode", i)
		}
		w = append(w, wireTool{Type: t.Type, Function: t.Function})
	}
	body, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return body, nil
}

// bodyFor returns the encoded tools of a request whose tools are the slice of a kept set,
// nil for any other.
func (ts *toolSets) bodyFor(tools []openai.Tool) []byte {
	p := ts.latest.Load()
	if p == nil || len(tools) == 0 {
		return nil
	}
	for _, s := range *p {
		if len(tools) == len(s.tools) && &tools[0] == &s.tools[0] {
			return s.body
		}
	}
	return nil
}
