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
//
// Every status card shows its run's calls' arguments, rendered again at every change of
// the card, so this runs for every call of a run at every step: an object whose names
// need no unquoting is split where it stands (scanMembers), and only the others go
// through encoding/json's decoder, whose buffers were most of what rendering a card
// allocated.
func Members(raw string) (members []Member, ok bool) {
	if ms, ok, sure := scanMembers(raw); sure {
		return ms, ok
	}
	return decodeMembers(raw)
}

// scanMembers is Members for valid JSON whose object's names are plain ASCII without
// escapes. sure is false when it cannot tell: a name it would have to unquote.
func scanMembers(raw string) (members []Member, ok, sure bool) {
	if !json.Valid([]byte(raw)) {
		return nil, false, true
	}
	i := skipSpace(raw, 0)
	if raw[i] != '{' {
		return nil, false, true
	}
	i = skipSpace(raw, i+1)
	if raw[i] == '}' {
		return nil, true, true
	}
	for {
		// raw is valid JSON, so a name, a colon and a value follow.
		end := i + 1
		for ; raw[end] != '"'; end++ {
			if c := raw[end]; c == '\\' || c < 0x20 || c >= 0x80 {
				return nil, false, false
			}
		}
		name := raw[i+1 : end]
		i = skipSpace(raw, end+1) + 1 // past the colon
		i = skipSpace(raw, i)
		vend := skipValue(raw, i)
		members = append(members, Member{Name: name, Value: json.RawMessage(raw[i:vend])})
		i = skipSpace(raw, vend)
		if raw[i] == '}' {
			return members, true, true
		}
		i = skipSpace(raw, i+1) // past the comma
	}
}

// skipSpace returns the index of the first byte from i on that is not JSON whitespace.
func skipSpace(raw string, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the valid JSON value that starts at i.
func skipValue(raw string, i int) int {
	depth := 0
	for ; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			for i++; raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of the enclosing object: a number or literal ended
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// decodeMembers is Members through encoding/json's decoder.
func decodeMembers(raw string) (members []Member, ok bool) {
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
