package slackfake

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// Streaming messages: chat.startStream opens one in a thread and answers its ts,
// chat.appendStream adds to an open one and chat.stopStream closes it, as Slack's
// reference describes them. Outside a direct message a stream needs its recipient
// (recipient_team_id and recipient_user_id); a ts that is not an open stream is
// message_not_in_streaming_state; markdown_text over 12,000 characters is msg_too_long.
// chat.delete deletes a message. RefuseStreams makes startStream answer an error, as Slack
// does for an app without the Agents & AI Apps feature or its scope.

// maxStreamText is the limit of markdown_text in the streaming methods.
const maxStreamText = 12000

// StreamedMessage is what a stream showed: its markdown text and chunks, in the order
// they came, and whether it was stopped.
type StreamedMessage struct {
	Channel, ThreadTS, TS string
	Text                  string
	Chunks                []json.RawMessage
	// Blocks are the blocks chat.stopStream put at the bottom, as sent.
	Blocks  string
	Stopped bool
}

// RefuseStreams makes every later chat.startStream answer {"ok":false,"error":code}.
func (s *Server) RefuseStreams(code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuseStreams = code
}

// Streams returns the streamed messages, oldest first.
func (s *Server) Streams() []StreamedMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]StreamedMessage, 0, len(s.streams))
	for _, m := range s.streams {
		c := *m
		c.Chunks = append([]json.RawMessage(nil), m.Chunks...)
		out = append(out, c)
	}
	return out
}

// streamLocked answers the streaming methods and chat.delete; s.mu must be held.
func (s *Server) streamLocked(method string, v url.Values) (body, ts string) {
	fail := func(code string) (string, string) { return `{"ok":false,"error":"` + code + `"}`, "" }
	if len([]rune(v.Get("markdown_text"))) > maxStreamText {
		return fail("msg_too_long")
	}
	var chunks []json.RawMessage
	if c := v.Get("chunks"); c != "" {
		if err := json.Unmarshal([]byte(c), &chunks); err != nil {
			return fail("invalid_chunks")
		}
	}
	channel := v.Get("channel")
	var m *StreamedMessage
	switch method {
	case "chat.startStream":
		switch {
		case s.refuseStreams != "":
			return fail(s.refuseStreams)
		case v.Get("thread_ts") == "":
			return fail("invalid_arguments")
		case !strings.HasPrefix(channel, "D") && v.Get("recipient_team_id") == "":
			return fail("missing_recipient_team_id")
		case !strings.HasPrefix(channel, "D") && v.Get("recipient_user_id") == "":
			return fail("missing_recipient_user_id")
		}
		ts = s.tsLocked()
		m = &StreamedMessage{Channel: channel, ThreadTS: v.Get("thread_ts"), TS: ts}
		s.streams = append(s.streams, m)
	case "chat.appendStream", "chat.stopStream":
		for _, o := range s.streams {
			if o.Channel == channel && o.TS == v.Get("ts") && !o.Stopped {
				m = o
			}
		}
		if m == nil {
			return fail("message_not_in_streaming_state")
		}
		if method == "chat.stopStream" {
			m.Stopped, m.Blocks = true, v.Get("blocks")
		}
	case "chat.delete":
		for i, o := range s.streams {
			if o.Channel == channel && o.TS == v.Get("ts") {
				s.streams = append(s.streams[:i], s.streams[i+1:]...)
				return fmt.Sprintf(`{"ok":true,"channel":%q,"ts":%q}`, channel, o.TS), ""
			}
		}
		return fmt.Sprintf(`{"ok":true,"channel":%q,"ts":%q}`, channel, v.Get("ts")), ""
	}
	m.Text += v.Get("markdown_text")
	m.Chunks = append(m.Chunks, chunks...)
	b, _ := json.Marshal(map[string]any{"ok": true, "channel": channel, "ts": m.TS})
	return string(b), ts
}
