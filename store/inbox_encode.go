package store

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/loopbot/loopbot/bot"
)

// The inbox entry's encoding.
//
// Accept stores a burst's events one after another in the writer's transaction while the
// platform waits for its acks, so an inbox entry is written by appendInboxEntry rather than
// encoding/json's reflection, in about a third of the time and with one allocation instead
// of three (BenchmarkInboxEntryEncoding). The bytes are encoding/json's, field for field (FuzzAppendInboxEntry holds them to it, and
// TestAppendInboxEntryCoversEveryField fails when InboxEntry or Event gains a field this
// does not write). An entry it does not write itself (one with the thread's history, a time
// encoding/json refuses) is marshalled by encoding/json.

// appendInboxEntry appends e's JSON, as encoding/json writes it, to b.
func appendInboxEntry(b []byte, e *bot.InboxEntry) ([]byte, error) {
	ev := &e.Event
	if ev.History != nil || !ev.At.IsZero() && !rfc3339(ev.At) {
		data, err := json.Marshal(e)
		return append(b, data...), err
	}
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"event":{"kind":`...)
	b = appendJSONString(b, string(ev.Kind))
	b = append(b, `,"id":`...)
	b = appendJSONString(b, ev.ID)
	b = append(b, `,"thread":`...)
	b = appendThreadRef(b, ev.Thread)
	b = append(b, `,"user":{"id":`...)
	b = appendJSONString(b, ev.User.ID)
	if ev.User.Name != "" {
		b = append(b, `,"name":`...)
		b = appendJSONString(b, ev.User.Name)
	}
	if ev.User.Bot {
		b = append(b, `,"bot":true`...)
	}
	b = append(b, '}')
	if ev.Text != "" {
		b = append(b, `,"text":`...)
		b = appendJSONString(b, ev.Text)
	}
	if ev.Command != "" {
		b = append(b, `,"command":`...)
		b = appendJSONString(b, ev.Command)
	}
	if ev.ActionID != "" {
		b = append(b, `,"action_id":`...)
		b = appendJSONString(b, ev.ActionID)
	}
	if !ev.At.IsZero() {
		b = append(b, `,"at":"`...)
		b = ev.At.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if ev.Direct {
		b = append(b, `,"direct":true`...)
	}
	b = append(b, '}')
	if e.Replica != "" {
		b = append(b, `,"replica":`...)
		b = appendJSONString(b, e.Replica)
	}
	return append(b, '}'), nil
}

// rfc3339 reports whether encoding/json writes t (time.Time.MarshalJSON), which refuses a
// year outside [0,9999] and a zone offset of a day or more.
func rfc3339(t time.Time) bool {
	_, off := t.Zone()
	return t.Year() >= 0 && t.Year() <= 9999 && off > -24*60*60 && off < 24*60*60
}

// appendJSONString appends s quoted as encoding/json quotes a string: <, > and & escaped
// for HTML, the control characters and the line and paragraph separators escaped, invalid
// UTF-8 replaced.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendThreadRef appends th's JSON, as encoding/json writes a bot.ThreadRef, to b: the inbox's
// events and the outbox's items both hold one.
func appendThreadRef(b []byte, th bot.ThreadRef) []byte {
	b = append(b, `{"platform":`...)
	b = appendJSONString(b, th.Platform)
	if th.Workspace != "" {
		b = append(b, `,"workspace":`...)
		b = appendJSONString(b, th.Workspace)
	}
	b = append(b, `,"channel":`...)
	b = appendJSONString(b, th.Channel)
	b = append(b, `,"thread":`...)
	b = appendJSONString(b, th.Thread)
	return append(b, '}')
}
