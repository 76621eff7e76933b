package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// TestToolSetsFollowTheSpecs checks that a request's tools are translated once for a list
// of specs and again whenever the specs differ: a kept set is used only for the same
// names, descriptions and schemas in the same order, wherever the list itself lives.
func TestToolSetsFollowTheSpecs(t *testing.T) {
	specs := func() []agent.ToolSpec {
		return []agent.ToolSpec{
			{Name: "read_file", Description: "Reads a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
			{Name: "look"},
		}
	}
	c := &Client{model: "m"}
	body := func(tools []agent.ToolSpec) string {
		t.Helper()
		creq, err := c.request(agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}, Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		kept := c.tools.bodyFor(creq.Tools)
		if kept == nil {
			t.Fatal("the request's tools are not a kept set's")
		}
		fresh, err := encodeTools(creq.Tools)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(kept, fresh) {
			t.Fatalf("kept tools %s, want %s", kept, fresh)
		}
		return string(kept)
	}
	first := body(specs())
	if again := body(specs()); again != first {
		t.Errorf("the same specs in another slice gave %s, want %s", again, first)
	}
	if n := len(*c.tools.latest.Load()); n != 1 {
		t.Errorf("%d sets kept for one list of specs, want 1", n)
	}
	changes := []struct {
		name   string
		change func(s []agent.ToolSpec) []agent.ToolSpec
		want   string
	}{
		{"a description", func(s []agent.ToolSpec) []agent.ToolSpec { s[0].Description = "Reads a whole file."; return s }, "Reads a whole file."},
		{"a name", func(s []agent.ToolSpec) []agent.ToolSpec { s[1].Name = "peek"; return s }, `"peek"`},
		{"a schema", func(s []agent.ToolSpec) []agent.ToolSpec {
			s[0].Parameters = json.RawMessage(`{"type":"object","properties":{"file":{"type":"string"}}}`)
			return s
		}, `"file"`},
		{"a tool fewer", func(s []agent.ToolSpec) []agent.ToolSpec { return s[1:] }, `"look"`},
	}
	for _, ch := range changes {
		t.Run(ch.name, func(t *testing.T) {
			got := body(ch.change(specs()))
			if got == first || !strings.Contains(got, ch.want) {
				t.Errorf("tools %s, want them changed to show %s", got, ch.want)
			}
			if again := body(specs()); again != first {
				t.Errorf("the first specs again gave %s, want %s", again, first)
			}
		})
	}
	for i := range 2 * keptToolSets {
		s := specs()
		s[1].Name = fmt.Sprintf("tool_%d", i)
		if got := body(s); !strings.Contains(got, s[1].Name) {
			t.Errorf("tools %s, want %s", got, s[1].Name)
		}
	}
	if n := len(*c.tools.latest.Load()); n != keptToolSets {
		t.Errorf("%d sets kept, want at most %d", n, keptToolSets)
	}
	if _, err := c.request(agent.Request{Tools: []agent.ToolSpec{{Name: "bad", Parameters: json.RawMessage(`{`)}}}); err == nil {
		t.Error("a tool with a schema that is not JSON was taken")
	}
}
