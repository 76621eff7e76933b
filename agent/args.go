package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// maxArgsBytes bounds the arguments of one tool call: a model that writes megabytes of
// arguments is broken, and its garbage must not reach a tool.
const maxArgsBytes = 1 << 20

// decodeArgs parses a tool call's arguments, which must be one JSON object. An empty string
// means no arguments, as some models send for tools without parameters.
func decodeArgs(raw string) (map[string]any, error) {
	if len(raw) > maxArgsBytes {
		return nil, fmt.Errorf("%d bytes is more than the %d allowed", len(raw), maxArgsBytes)
	}
	if strings.TrimSpace(raw) == "" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			// Said in words: the decoder's "unexpected EOF" reads, to a model and to a
			// person looking at the call, like a broken connection.
			return nil, errors.New("the JSON ends before the object is closed")
		}
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("extra data after the JSON object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("got %s, want an object", jsonKind(v))
	}
	return obj, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return "a value"
}

// rawArgs is the arguments a tool sees: the model's text, or an empty object for none.
func rawArgs(s string) json.RawMessage {
	if strings.TrimSpace(s) == "" {
		return json.RawMessage("{}")
	}
	return json.RawMessage(s)
}

// canonicalArgs is the arguments with keys sorted and spacing removed, so that the same call
// written twice is recognised as the same.
func canonicalArgs(raw string) string {
	obj, err := decodeArgs(raw)
	if err != nil {
		return strings.TrimSpace(raw)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(obj) != nil {
		return strings.TrimSpace(raw)
	}
	return strings.TrimSpace(b.String())
}

// schema checks arguments against a tool's JSON Schema.
type schema struct {
	resolved *jsonschema.Resolved
}

func compileSchema(raw json.RawMessage) (*schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return &schema{}, nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("parameter schema: %w", err)
	}
	res, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("parameter schema: %w", err)
	}
	return &schema{resolved: res}, nil
}

func (s *schema) validate(args map[string]any) error {
	if s.resolved == nil {
		return nil
	}
	// The validator wants plain JSON values; json.Number is turned into float64 by a
	// round trip, which also normalises anything the decoder produced.
	b, err := json.Marshal(args)
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return s.resolved.Validate(v)
}
