package text

import (
	"encoding/json"
	"io"
	"strings"
)

// Member is one name and value of a JSON object, the value as written.
type Member struct {
	Name  string
	Value json.RawMessage
}

// Members returns the members of the one JSON object raw holds, in the order written, so a
// tool call's arguments can be shown as the model sent them. ok is false for anything
// else: invalid JSON, another type, or more after the object.
func Members(raw string) (members []Member, ok bool) {
	dec := json.NewDecoder(strings.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		name, _ := tok.(string)
		members = append(members, Member{name, v})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return members, true
}
