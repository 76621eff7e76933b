package tools

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loopbot/loopbot/agent"
)

// TestFormFields reads requested schemas as the MCP specification writes them (string,
// number, integer, boolean, enums with and without titles, multi-select arrays) and refuses
// what loopbot cannot relay.
func TestFormFields(t *testing.T) {
	schema := map[string]any{
		"type":     "object",
		"required": []string{"size"},
		"properties": map[string]any{
			"size":   map[string]any{"type": "string", "enum": []string{"s", "l"}, "enumNames": []string{"Small", "Large"}},
			"colour": map[string]any{"type": "string", "oneOf": []any{map[string]any{"const": "#f00", "title": "Red"}, map[string]any{"const": "#0f0", "title": "Green"}}},
			"count":  map[string]any{"type": "integer", "title": "How many"},
			"ok":     map[string]any{"type": "boolean"},
			"tags":   map[string]any{"type": "array", "items": map[string]any{"enum": []string{"a", "b"}}},
		},
	}
	fields, err := formFields(schema)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fields {
		names = append(names, f.name)
	}
	if want := []string{"size", "colour", "count", "ok", "tags"}; !reflect.DeepEqual(names, want) {
		t.Errorf("fields in order %v, want %v (required first, then by name)", names, want)
	}
	by := map[string]formField{}
	for _, f := range fields {
		by[f.name] = f
	}
	tests := []struct {
		field, answer string
		want          any
		err           string
	}{
		{"size", "Large", "l", ""},
		{"size", "s", "s", ""},
		{"size", "medium", nil, "one of the choices"},
		{"colour", "red", "#f00", ""},
		{"count", " 12 ", int64(12), ""},
		{"count", "1.5", nil, "whole number"},
		{"ok", "Yes", true, ""},
		{"ok", "false", false, ""},
		{"ok", "maybe", nil, "yes or no"},
		{"tags", "a, b", []string{"a", "b"}, ""},
		{"tags", "a, c", nil, `"c" is not one of the choices`},
	}
	for _, tt := range tests {
		got, err := by[tt.field].value(tt.answer)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s = %q: err %v, want %q", tt.field, tt.answer, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s = %q: %#v, %v; want %#v", tt.field, tt.answer, got, err, tt.want)
		}
	}
	if q := by["size"].question("MCP server x", "Pick", 5); !reflect.DeepEqual(q.Options, []string{"Small", "Large"}) || q.Optional {
		t.Errorf("size question = %+v", q)
	}
	if q := by["ok"].question("MCP server x", "Pick", 5); !reflect.DeepEqual(q.Options, []string{"Yes", "No"}) || !q.Optional {
		t.Errorf("ok question = %+v", q)
	}

	for name, bad := range map[string]any{
		"not an object": map[string]any{"type": "string"},
		"nested":        map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "object"}}},
		"bare array":    map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "array"}}},
	} {
		if _, err := formFields(bad); err == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
}

// TestMCPElicitationURLModeDeclined: loopbot advertises form mode only, and declines a
// request to send the person to a server's address.
func TestMCPElicitationURLModeDeclined(t *testing.T) {
	m := NewManager(MCPConfig{}, quietLogger())
	s := &mcpServer{cfg: MCPServerConfig{Name: "u"}, calls: map[*mcpCall]struct{}{}}
	call, done := s.begin(t.Context(), agent.Invocation{RunID: "r1", CallID: "c1"}, "t")
	defer done()
	res, err := m.elicit(t.Context(), s, &mcp.ElicitRequest{Params: &mcp.ElicitParams{Mode: "url", URL: "https://evil.example/login", Message: "sign in"}})
	if err != nil || res.Action != "decline" {
		t.Errorf("url elicitation = %+v, %v; want a decline", res, err)
	}
	if !strings.Contains(call.note(), "declined (loopbot relays forms only)") {
		t.Errorf("note = %q", call.note())
	}
}

// FuzzFormFields reads requested schemas a server may send, whatever they hold: reading one
// never panics, every field read has a type loopbot relays, and an answer to any of them
// either converts or says why not.
func FuzzFormFields(f *testing.F) {
	f.Add(`{"type":"object","properties":{"a":{"type":"string","enum":["x","y"]},"n":{"type":"integer"}},"required":["a"]}`, "x")
	f.Add(`{"type":"object","properties":{"c":{"type":"string","oneOf":[{"const":"1","title":"One"}]},"t":{"type":"array","items":{"anyOf":[{"const":"q"}]}}}}`, "One, q")
	f.Add(`{"type":"object","properties":{"b":{"type":"boolean"},"f":{"type":"number"}}}`, "1e309")
	f.Fuzz(func(t *testing.T, schema, answer string) {
		var v any
		if json.Unmarshal([]byte(schema), &v) != nil {
			return
		}
		fields, err := formFields(v)
		if err != nil {
			return
		}
		for _, fl := range fields {
			switch fl.typ {
			case "string", "number", "integer", "boolean", "array":
			default:
				t.Fatalf("field %q of type %q", fl.name, fl.typ)
			}
			if len(fl.values) != len(fl.labels) {
				t.Fatalf("field %q: %d values, %d labels", fl.name, len(fl.values), len(fl.labels))
			}
			fl.question("MCP server x", "m", len(fields))
			if got, err := fl.value(answer); err == nil && got == nil {
				t.Fatalf("field %q: %q converted to nil", fl.name, answer)
			}
		}
	})
}
