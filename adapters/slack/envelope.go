package slack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// The Socket Mode envelope.
//
// Every frame Slack sends over Socket Mode is a JSON object: hello when a connection opens,
// disconnect when Slack wants the app to reconnect, and the envelopes that carry a payload
// (events_api, interactive, slash_commands) with the envelope_id the app acknowledges
// (https://api.slack.com/apis/connections/socket-implement). The acknowledgement waits on
// what the receiving loop does with each frame, so the loop reads only the envelope's own
// fields here, in one pass that does not decode the payload: it is handed on as the bytes
// it was, to the payload's own decoder (decode.go), which reads it once.

// envelope is one Socket Mode frame's own fields.
type envelope struct {
	Type       string
	EnvelopeID string
	// Payload is the payload's JSON as it was in the frame (a slice of it); nil when the
	// frame has none.
	Payload                []byte
	AcceptsResponsePayload bool
	RetryAttempt           int
	RetryReason            string
	// Reason is a disconnect's: refresh_requested, warning or link_disabled.
	Reason string
}

// envelopeFields are the keys decodeEnvelope keeps; every other key's value is skipped.
const (
	fieldType = iota
	fieldEnvelopeID
	fieldPayload
	fieldAccepts
	fieldRetryAttempt
	fieldRetryReason
	fieldReason
	fieldOther
)

var envelopeKeys = [...]string{
	fieldType:         "type",
	fieldEnvelopeID:   "envelope_id",
	fieldPayload:      "payload",
	fieldAccepts:      "accepts_response_payload",
	fieldRetryAttempt: "retry_attempt",
	fieldRetryReason:  "retry_reason",
	fieldReason:       "reason",
}

// errEnvelope is what decodeEnvelope reports for a frame that is not a JSON object of the
// envelope's shape.
var errEnvelope = errors.New("not a socket mode envelope")

// decodeEnvelope reads a frame's envelope fields as encoding/json would into a struct of
// them (keys matched without regard to case, the last of a repeated key winning, null
// leaving a field empty), without decoding the payload or the values of other keys: those
// are skipped with a scan that only follows strings and brackets. FuzzDecodeEnvelope holds
// it to encoding/json on every valid frame.
func decodeEnvelope(frame []byte) (envelope, error) {
	var e envelope
	d := envelopeScanner{b: frame}
	d.space()
	if !d.eat('{') {
		return envelope{}, errEnvelope
	}
	d.space()
	if d.eat('}') {
		return e, d.end()
	}
	for {
		d.space()
		key, ok := d.str()
		if !ok {
			return envelope{}, errEnvelope
		}
		d.space()
		if !d.eat(':') {
			return envelope{}, errEnvelope
		}
		d.space()
		start := d.i
		if !d.skip(1) {
			return envelope{}, errEnvelope
		}
		if err := e.set(fieldOf(key), frame[start:d.i]); err != nil {
			return envelope{}, err
		}
		d.space()
		if d.eat('}') {
			return e, d.end()
		}
		if !d.eat(',') {
			return envelope{}, errEnvelope
		}
	}
}

// fieldOf is the envelope field a key (a JSON string token, quotes included) names.
func fieldOf(key []byte) int {
	name := key[1 : len(key)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		var s string
		if json.Unmarshal(key, &s) != nil {
			return fieldOther
		}
		name = []byte(s)
	}
	for f, k := range envelopeKeys {
		if bytes.EqualFold(name, []byte(k)) {
			return f
		}
	}
	return fieldOther
}

// set stores value, a whole JSON value, in field f.
func (e *envelope) set(f int, value []byte) error {
	if f == fieldOther {
		return nil
	}
	if f == fieldPayload {
		e.Payload = value
		return nil
	}
	if string(value) == "null" {
		return nil
	}
	var err error
	switch f {
	case fieldType:
		e.Type, err = jsonString(value)
	case fieldEnvelopeID:
		e.EnvelopeID, err = jsonString(value)
	case fieldRetryReason:
		e.RetryReason, err = jsonString(value)
	case fieldReason:
		e.Reason, err = jsonString(value)
	case fieldAccepts:
		switch string(value) {
		case "true":
			e.AcceptsResponsePayload = true
		case "false":
			e.AcceptsResponsePayload = false
		default:
			err = errEnvelope
		}
	case fieldRetryAttempt:
		e.RetryAttempt, err = strconv.Atoi(string(value))
		if err != nil || !validNumber(value) {
			err = errEnvelope
		}
	}
	if err != nil {
		return fmt.Errorf("envelope field %s: %w", envelopeKeys[f], errEnvelope)
	}
	return nil
}

// jsonString is a string token's value. A plain one is copied as it is; one with escapes
// or bytes outside ASCII goes through encoding/json, which also replaces invalid UTF-8.
func jsonString(tok []byte) (string, error) {
	if len(tok) < 2 || tok[0] != '"' {
		return "", errEnvelope
	}
	inner := tok[1 : len(tok)-1]
	for _, c := range inner {
		if c == '\\' || c >= 0x80 {
			var s string
			if err := json.Unmarshal(tok, &s); err != nil {
				return "", errEnvelope
			}
			return s, nil
		}
	}
	return string(inner), nil
}

// validNumber reports whether tok is an integer as JSON writes one: no leading zeros, no
// plus sign (which strconv.Atoi would take).
func validNumber(tok []byte) bool {
	if len(tok) > 0 && tok[0] == '-' {
		tok = tok[1:]
	}
	return len(tok) > 0 && tok[0] != '+' && (tok[0] != '0' || len(tok) == 1)
}

// maxEnvelopeDepth bounds the nesting the scan follows, as encoding/json does: the frame's
// own object is at depth 1.
const maxEnvelopeDepth = 10000

// envelopeScanner walks a frame's bytes.
type envelopeScanner struct {
	b []byte
	i int
}

func (d *envelopeScanner) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *envelopeScanner) eat(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// end reports an error unless only white space is left.
func (d *envelopeScanner) end() error {
	d.space()
	if d.i != len(d.b) {
		return errEnvelope
	}
	return nil
}

// str reads a string token, quotes included, checking its escapes and that it holds no
// control characters.
func (d *envelopeScanner) str() ([]byte, bool) {
	start := d.i
	if !d.eat('"') {
		return nil, false
	}
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return d.b[start:d.i], true
		case c < 0x20:
			return nil, false
		case c == '\\':
			d.i++
			if d.i >= len(d.b) {
				return nil, false
			}
			switch d.b[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i++
			case 'u':
				if d.i+5 > len(d.b) {
					return nil, false
				}
				for _, h := range d.b[d.i+1 : d.i+5] {
					if !isHex(h) {
						return nil, false
					}
				}
				d.i += 5
			default:
				return nil, false
			}
		default:
			d.i++
		}
	}
	return nil, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// skip passes over one JSON value, checking its syntax; depth is the nesting of the object
// or array it is in.
func (d *envelopeScanner) skip(depth int) bool {
	if d.i >= len(d.b) {
		return false
	}
	if c := d.b[d.i]; (c == '{' || c == '[') && depth+1 > maxEnvelopeDepth {
		return false
	}
	switch c := d.b[d.i]; {
	case c == '"':
		_, ok := d.str()
		return ok
	case c == '{':
		d.i++
		d.space()
		if d.eat('}') {
			return true
		}
		for {
			d.space()
			if _, ok := d.str(); !ok {
				return false
			}
			d.space()
			if !d.eat(':') {
				return false
			}
			d.space()
			if !d.skip(depth + 1) {
				return false
			}
			d.space()
			if d.eat('}') {
				return true
			}
			if !d.eat(',') {
				return false
			}
		}
	case c == '[':
		d.i++
		d.space()
		if d.eat(']') {
			return true
		}
		for {
			d.space()
			if !d.skip(depth + 1) {
				return false
			}
			d.space()
			if d.eat(']') {
				return true
			}
			if !d.eat(',') {
				return false
			}
		}
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	default:
		return d.number()
	}
}

func (d *envelopeScanner) literal(word string) bool {
	if !bytes.HasPrefix(d.b[d.i:], []byte(word)) {
		return false
	}
	d.i += len(word)
	return true
}

// number passes over a number as JSON's grammar has it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *envelopeScanner) number() bool {
	d.eat('-')
	switch {
	case d.eat('0'):
	case d.i < len(d.b) && '1' <= d.b[d.i] && d.b[d.i] <= '9':
		d.digits()
	default:
		return false
	}
	if d.eat('.') && d.digits() == 0 {
		return false
	}
	if d.eat('e') || d.eat('E') {
		if !d.eat('+') {
			d.eat('-')
		}
		if d.digits() == 0 {
			return false
		}
	}
	return true
}

func (d *envelopeScanner) digits() int {
	n := 0
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
		n++
	}
	return n
}
