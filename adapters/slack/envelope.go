package slack

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// The Socket Mode envelope.
//
// Every frame Slack sends over Socket Mode is a JSON object: hello when a connection opens,
// disconnect when Slack wants the app to reconnect, and the envelopes that carry a payload
// (events_api, interactive, slash_commands) with the envelope_id the app acknowledges
// (https://api.slack.com/apis/connections/socket-implement). The acknowledgement waits on
// what the receiving loop does with each frame, so the loop reads the frame once: the
// envelope's own fields, and a payload that is an Events API callback where it stands
// (callbackdecode.go); any other payload is handed on as the bytes it was, to its own
// decoder (decode.go). The pass is jsontext's, the syntactic layer of encoding/json/v2
// (go-json-experiment/json, which the store already uses), not a scanner of our own.

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

	// callback and event, when decoded is set, are the payload's, decoded as decodeCallback
	// decodes it: read in the envelope's own pass, where the payload is an Events API
	// callback that decodes without an error.
	callback callback
	event    message
	decoded  bool
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
// them (keys matched without regard to case, the last of a repeated key winning, invalid
// UTF-8 taken, null leaving a field empty), without decoding the values of other keys:
// jsontext (encoding/json/v2's syntactic layer) only checks their syntax and hands back
// their bytes. FuzzDecodeEnvelope holds it to encoding/json on every frame.
//
// A payload that is an object is read as an Events API callback where it stands, in the
// same pass (callbackAt), rather than checked here and read again by the payload's
// decoder: what an events_api envelope carries is read once. When that fails (the payload
// is no callback, or not valid), the frame is read again with the payload only checked,
// and that pass's answer is the frame's: an envelope of another type, or one whose payload
// the callback's decoder refuses, is as it was.
func decodeEnvelope(frame []byte) (envelope, error) {
	d := callbackDecoders.Get().(*callbackDecoder)
	defer callbackDecoders.Put(d)
	var e envelope
	err := d.envelopeMembers(frame, &e, func() error {
		// The last payload wins, as in encoding/json.
		e.callback, e.event, e.decoded = callback{}, message{}, false
		if d.dec.PeekKind() != '{' {
			v, err := d.dec.ReadValue()
			if err != nil {
				return errEnvelope
			}
			end := int(d.dec.InputOffset())
			e.Payload = frame[end-len(v) : end]
			return nil
		}
		start := valueStart(frame, d.dec.InputOffset())
		cb, m, ok := d.callbackAt(frame)
		if !ok {
			return errEnvelope
		}
		e.Payload = frame[start:d.dec.InputOffset()]
		e.callback, e.event, e.decoded = cb, m, true
		return nil
	})
	if err == nil {
		return e, nil
	}
	e = envelope{}
	if err := d.envelopeMembers(frame, &e, nil); err != nil {
		return envelope{}, err
	}
	return e, nil
}

// envelopeMembers reads frame's envelope fields into e. payload, if set, reads the value of
// each payload key, with the decoder standing before it; else the value's bytes are taken.
func (d *callbackDecoder) envelopeMembers(frame []byte, e *envelope, payload func() error) error {
	d.reset(frame)
	dec := &d.dec
	if dec.PeekKind() == 'n' {
		// encoding/json leaves a struct alone for null: an envelope of no fields.
		if _, err := dec.ReadToken(); err != nil {
			return errEnvelope
		}
		if _, err := dec.ReadToken(); err != io.EOF {
			return errEnvelope
		}
		return nil
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return errEnvelope
	}
	for dec.PeekKind() == '"' {
		key, err := dec.ReadToken()
		if err != nil {
			return errEnvelope
		}
		f := fieldOf(key.String())
		if f == fieldPayload && payload != nil {
			if err := payload(); err != nil {
				return err
			}
			continue
		}
		value, err := dec.ReadValue()
		if err != nil {
			return errEnvelope
		}
		// The value's bytes are the decoder's until its next read: take them from the frame,
		// where they end at the decoder's offset.
		end := int(dec.InputOffset())
		if err := e.set(f, frame[end-len(value):end]); err != nil {
			return err
		}
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '}' {
		return errEnvelope
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return errEnvelope
	}
	return nil
}

// fieldOf is the envelope field a key names.
func fieldOf(name string) int {
	for f, k := range envelopeKeys {
		if strings.EqualFold(name, k) {
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
		if value[0] == '"' {
			if k, ok := known(value[1 : len(value)-1]); ok {
				e.Type = k
				break
			}
		}
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
// or bytes outside ASCII is unescaped by jsontext, and when jsontext refuses it (invalid
// UTF-8, a lone surrogate) goes through encoding/json, which replaces what is invalid.
func jsonString(tok []byte) (string, error) {
	if len(tok) < 2 || tok[0] != '"' {
		return "", errEnvelope
	}
	inner := tok[1 : len(tok)-1]
	for _, c := range inner {
		if c == '\\' || c >= 0x80 {
			var buf [128]byte
			if out, err := jsontext.AppendUnquote(buf[:0], tok); err == nil {
				return string(out), nil
			}
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
