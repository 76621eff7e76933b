package slack

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// The Events API callback's own decoder.
//
// The receiving loop decodes every envelope's callback before its ack, so decodeCallback
// reads it with jsontext (encoding/json/v2's syntactic layer, as decodeEnvelope does)
// straight into callback and message, faster than jsonv1's reflection did and allocating
// only the strings it keeps (BenchmarkSocketFrameToEvent): the callback once, to find its fields and
// the event's bytes, and the event once, when the callback is an event_callback. It
// follows encoding/json's rules for these two structs, which FuzzDecodeCallback holds it
// to: keys matched without regard to case, the last of a repeated key winning (a repeated
// object or array merging into what the earlier one left, as encoding/json's does), null
// leaving a string as it was and a pointer nil, invalid UTF-8 replaced, and an error for a
// value of the wrong type or input that is not one JSON value.

// errCallback is what the decoder reports for a payload encoding/json would refuse.
var errCallback = errors.New("not an events api callback of the expected shape")

// errNoEventID is what the decoder reports for an event_callback without an event_id.
var errNoEventID = errors.New("no event_id")

// callbackDecoders keeps jsontext decoders (and their buffers) between payloads.
var callbackDecoders = sync.Pool{New: func() any { return new(callbackDecoder) }}

type callbackDecoder struct {
	r   bytes.Reader
	dec jsontext.Decoder
	// key holds an escaped key's name, unescaped.
	key [64]byte
}

// decoderOptions are encoding/json's: repeated keys and invalid UTF-8 are taken. They are
// made once, as each option is an interface value that would be allocated at every Reset.
var decoderOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// reset points the decoder at one whole JSON value.
func (d *callbackDecoder) reset(in []byte) {
	d.r.Reset(in)
	d.dec.Reset(&d.r, decoderOptions...)
}

// value reads the next value and returns it as a slice of in, which the decoder reads.
func (d *callbackDecoder) value(in []byte) ([]byte, error) {
	v, err := d.dec.ReadValue()
	if err != nil {
		return nil, errCallback
	}
	end := int(d.dec.InputOffset())
	return in[end-len(v) : end], nil
}

// end checks that nothing but white space follows the value read.
func (d *callbackDecoder) end() error {
	if _, err := d.dec.ReadToken(); err != io.EOF {
		return errCallback
	}
	return nil
}

// object reads the members of the object that begins next, calling member with each
// key (unquoted) and the decoder positioned at its value, which member must read. A null
// instead of the object is no member, as encoding/json leaves a struct alone for null;
// null reports whether it was one.
func (d *callbackDecoder) object(in []byte, member func(key []byte) error) (null bool, err error) {
	switch d.dec.PeekKind() {
	case 'n':
		_, err := d.value(in)
		return true, err
	case '{':
	default:
		return false, errCallback
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return false, errCallback
	}
	for d.dec.PeekKind() == '"' {
		name, err := d.value(in)
		if err != nil {
			return false, err
		}
		if err := member(unquoteKey(d.key[:0], name)); err != nil {
			return false, err
		}
	}
	if tok, err := d.dec.ReadToken(); err != nil || tok.Kind() != '}' {
		return false, errCallback
	}
	return false, nil
}

// unquoteKey returns a key's name: the bytes between its quotes when it has no escape,
// else the name unescaped into buf; nil, which names no field, for an escaped name with
// invalid UTF-8 (encoding/json would replace it, and no field name holds U+FFFD).
func unquoteKey(buf, name []byte) []byte {
	inner := name[1 : len(name)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	k, err := jsontext.AppendUnquote(buf, name)
	if err != nil {
		return nil
	}
	return k
}

// str reads a string value into *s; null leaves *s as it was.
func (d *callbackDecoder) str(in []byte, s *string) error {
	v, err := d.value(in)
	if err != nil {
		return err
	}
	switch v[0] {
	case 'n':
		return nil
	case '"':
		if k, ok := known(v[1 : len(v)-1]); ok {
			*s = k
			return nil
		}
		*s, err = jsonString(v)
		if err != nil {
			return errCallback
		}
		return nil
	}
	return errCallback
}

// known returns the value of a string that every callback repeats (its type, its event's
// type and channel type) or every envelope (its type) without allocating a copy of it.
func known(inner []byte) (string, bool) {
	switch string(inner) {
	case "events_api":
		return "events_api", true
	case "interactive":
		return "interactive", true
	case "slash_commands":
		return "slash_commands", true
	case "event_callback":
		return "event_callback", true
	case "app_mention":
		return "app_mention", true
	case "message":
		return "message", true
	case "channel":
		return "channel", true
	case "im":
		return "im", true
	case "group":
		return "group", true
	case "mpim":
		return "mpim", true
	}
	return "", false
}

// field returns the index of the name in names (lower case ASCII) that key matches as
// encoding/json matches a key to a field name, or -1: equal under Unicode case folding
// (bytes.EqualFold), by which a key outside ASCII may still match ("ſ" folds to "s", the
// Kelvin sign to "k").
func field(key []byte, names []string) int {
	var low [32]byte
	if len(key) <= len(low) {
		ascii := true
		for i, c := range key {
			if c >= utf8.RuneSelf {
				ascii = false
				break
			}
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			low[i] = c
		}
		if ascii {
			for f, name := range names {
				if string(low[:len(key)]) == name {
					return f
				}
			}
			return -1
		}
	}
	for f, name := range names {
		if bytes.EqualFold(key, []byte(name)) {
			return f
		}
	}
	return -1
}

// The fields of callback, message and their parts, in the order of the constants that
// index them.
var (
	callbackNames = []string{"type", "team_id", "event_id", "challenge", "event", "authorizations"}
	messageNames  = []string{"type", "subtype", "user", "bot_id", "text", "ts", "thread_ts", "channel", "channel_type", "edited"}
	editedNames   = []string{"user", "ts"}
	teamNames     = []string{"team_id"}
)

const (
	cbType = iota
	cbTeamID
	cbEventID
	cbChallenge
	cbEvent
	cbAuthorizations
)

const (
	mType = iota
	mSubtype
	mUser
	mBotID
	mText
	mTS
	mThreadTS
	mChannel
	mChannelType
	mEdited
)

// decodeCallbackFields reads an Events API callback and, when it is an event_callback with
// an event_id, its event, as decodeCallback's contract says. cb.Event is a slice of body.
//
// It reads the event where it stands in the callback, in the same pass (callbackInOnePass);
// when that pass fails, or meets a callback it cannot settle alone (no event), the
// callback is read again in two passes (callbackInTwoPasses), whose result is the answer:
// the first pass reads each event value it meets, an earlier one a later key replaces
// included, and an error in one of those is no error for encoding/json. A callback that
// decodes in one pass decodes the same in two: the last event value read in place is the
// one the second pass reads.
func decodeCallbackFields(body []byte) (cb callback, m message, err error) {
	d := callbackDecoders.Get().(*callbackDecoder)
	defer callbackDecoders.Put(d)
	if cb, m, ok := d.callbackInOnePass(body); ok {
		return cb, m, nil
	}
	return d.callbackInTwoPasses(body)
}

// callbackInOnePass is decodeCallbackFields reading each event value into m as it meets it;
// false when the pass failed or found no event in an event_callback with an event_id (for
// the second pass to say what is wrong).
func (d *callbackDecoder) callbackInOnePass(body []byte) (cb callback, m message, ok bool) {
	d.reset(body)
	if cb, m, ok = d.callbackAt(body); !ok || d.end() != nil {
		return callback{}, message{}, false
	}
	return cb, m, true
}

// callbackAt is callbackInOnePass of the callback object that begins next in in, which the
// decoder reads (the whole body, or a Socket Mode frame whose payload it is).
func (d *callbackDecoder) callbackAt(in []byte) (cb callback, m message, ok bool) {
	sawEvent := false
	if err := d.callbackObject(in, &cb, func() error {
		start := valueStart(in, d.dec.InputOffset())
		// A repeated event replaces the one before, as a json.RawMessage does.
		m, sawEvent = message{}, true
		if err := d.message(in, &m); err != nil {
			return err
		}
		cb.Event = in[start:d.dec.InputOffset()]
		return nil
	}); err != nil {
		return callback{}, message{}, false
	}
	switch {
	case cb.Type != "event_callback":
		return cb, message{}, true
	case cb.EventID == "" || !sawEvent:
		return callback{}, message{}, false
	}
	return cb, m, true
}

// valueStart is where the value of the key that ends at offset begins in in: after the
// white space and the colon between them. The value ends where the decoder stands once
// it is read.
func valueStart(in []byte, offset int64) int {
	start := int(offset)
	for start < len(in) && (in[start] == ' ' || in[start] == '\t' || in[start] == '\n' || in[start] == '\r' || in[start] == ':') {
		start++
	}
	return start
}

// callbackInTwoPasses is decodeCallbackFields reading the callback, then its last event
// value alone.
func (d *callbackDecoder) callbackInTwoPasses(body []byte) (cb callback, m message, err error) {
	if err := d.callbackMembers(body, &cb, func() error {
		v, err := d.value(body)
		cb.Event = v
		return err
	}); err != nil {
		return callback{}, message{}, err
	}
	if cb.Type != "event_callback" {
		return cb, message{}, nil
	}
	if cb.EventID == "" {
		return callback{}, message{}, errNoEventID
	}
	// A callback without an event is no input at all to the event's decoding, which
	// refuses it, as encoding/json does.
	ev := cb.Event
	d.reset(ev)
	if err := d.message(ev, &m); err != nil {
		return callback{}, message{}, err
	}
	if err := d.end(); err != nil {
		return callback{}, message{}, err
	}
	return cb, m, nil
}

// callbackMembers reads body, the whole callback, into cb; event reads the value of each
// event key, with the decoder standing before it.
func (d *callbackDecoder) callbackMembers(body []byte, cb *callback, event func() error) error {
	d.reset(body)
	if err := d.callbackObject(body, cb, event); err != nil {
		return err
	}
	return d.end()
}

// callbackObject is callbackMembers of the callback object that begins next in in.
func (d *callbackDecoder) callbackObject(in []byte, cb *callback, event func() error) error {
	_, err := d.object(in, func(key []byte) error {
		switch field(key, callbackNames) {
		case cbType:
			return d.str(in, &cb.Type)
		case cbTeamID:
			return d.str(in, &cb.TeamID)
		case cbEventID:
			return d.str(in, &cb.EventID)
		case cbChallenge:
			return d.str(in, &cb.Challenge)
		case cbEvent:
			return event()
		case cbAuthorizations:
			return d.authorizations(in, cb)
		}
		_, err := d.value(in)
		return err
	})
	return err
}

// message reads the event object that begins next into m.
func (d *callbackDecoder) message(in []byte, m *message) error {
	_, err := d.object(in, func(key []byte) error {
		switch field(key, messageNames) {
		case mType:
			return d.str(in, &m.Type)
		case mSubtype:
			return d.str(in, &m.Subtype)
		case mUser:
			return d.str(in, &m.User)
		case mBotID:
			return d.str(in, &m.BotID)
		case mText:
			return d.str(in, &m.Text)
		case mTS:
			return d.str(in, &m.TS)
		case mThreadTS:
			return d.str(in, &m.ThreadTS)
		case mChannel:
			return d.str(in, &m.Channel)
		case mChannelType:
			return d.str(in, &m.ChannelType)
		case mEdited:
			return d.edited(in, m)
		}
		_, err := d.value(in)
		return err
	})
	return err
}

// edited reads a message's edited object into m.Edited: null sets it nil, an object is
// read into the one there (a repeated key merges, as in encoding/json) or a new one.
func (d *callbackDecoder) edited(in []byte, m *message) error {
	if d.dec.PeekKind() == 'n' {
		_, err := d.value(in)
		m.Edited = nil
		return err
	}
	if m.Edited == nil {
		m.Edited = new(struct {
			User string `json:"user"`
			TS   string `json:"ts"`
		})
	}
	e := m.Edited
	_, err := d.object(in, func(key []byte) error {
		switch field(key, editedNames) {
		case 0:
			return d.str(in, &e.User)
		case 1:
			return d.str(in, &e.TS)
		}
		_, err := d.value(in)
		return err
	})
	return err
}

// authorizations reads the authorizations array as encoding/json reads an array into a
// slice that may hold an earlier one's elements: null sets it nil; each element is read
// into the element already at its index, if any (and if the array's backing store has
// it), else a zero one; what is left after the last is cut off, and an empty array makes
// an empty slice.
func (d *callbackDecoder) authorizations(in []byte, cb *callback) error {
	if d.dec.PeekKind() == 'n' {
		_, err := d.value(in)
		cb.Authorizations = nil
		return err
	}
	if d.dec.PeekKind() != '[' {
		return errCallback
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return errCallback
	}
	s := cb.Authorizations
	i := 0
	for d.dec.PeekKind() != ']' {
		if d.dec.PeekKind() == 0 {
			return errCallback
		}
		if i >= len(s) {
			// Within the array's capacity, this brings back the element an earlier, longer
			// array left there, as reflect's SetLen does for encoding/json.
			s = slices.Grow(s, 1)[:i+1]
		}
		a := &s[i]
		if _, err := d.object(in, func(key []byte) error {
			if field(key, teamNames) == 0 {
				return d.str(in, &a.TeamID)
			}
			_, err := d.value(in)
			return err
		}); err != nil {
			return err
		}
		i++
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return errCallback
	}
	switch {
	case i == 0:
		s = s[:0:0]
		if s == nil {
			s = make([]struct {
				TeamID string `json:"team_id"`
			}, 0)
		}
	case i < len(s):
		s = s[:i]
	}
	cb.Authorizations = s
	return nil
}
