package slack

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/slack-go/slack/slackevents"

	"github.com/loopbot/loopbot/adapters/slack/slackfake"
)

// referenceEnvelope is the envelope's fields as encoding/json reads them: what
// decodeEnvelope must agree with.
type referenceEnvelope struct {
	Type                   string          `json:"type"`
	EnvelopeID             string          `json:"envelope_id"`
	Payload                json.RawMessage `json:"payload"`
	AcceptsResponsePayload bool            `json:"accepts_response_payload"`
	RetryAttempt           int             `json:"retry_attempt"`
	RetryReason            string          `json:"retry_reason"`
	Reason                 string          `json:"reason"`
}

func TestDecodeEnvelopeCaptured(t *testing.T) {
	for _, tc := range []struct {
		file string
		want envelope
	}{
		{"hello.json", envelope{Type: "hello"}},
		{"disconnect_link_disabled.json", envelope{Type: "disconnect", Reason: "link_disabled"}},
		{"events_api_message_im.json", envelope{Type: "events_api", EnvelopeID: "0367683f-3be8-4280-b339-36e3f6652bac"}},
		{"events_api_retry.json", envelope{Type: "events_api", EnvelopeID: "0367683f-3be8-4280-b339-36e3f6652bac", RetryAttempt: 1, RetryReason: "timeout"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			frame := fixture(t, "socket/"+tc.file)
			got, err := decodeEnvelope(frame)
			if err != nil {
				t.Fatal(err)
			}
			var ref referenceEnvelope
			if err := json.Unmarshal(frame, &ref); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Payload, ref.Payload) {
				t.Errorf("payload\n got %s\nwant %s", got.Payload, ref.Payload)
			}
			// Slack's events_api payloads are read with the envelope.
			if got.Type == "events_api" && !got.decoded {
				t.Errorf("the payload of %s was not read with the envelope", tc.file)
			}
			got = withoutCallback(t, got)
			got.Payload = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("envelope\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	// The payload is handed on as it was, and its own decoder reads it.
	frame := fixture(t, "socket/events_api_message_im.json")
	e, _ := decodeEnvelope(frame)
	ev, ok, err := decodeEvent(e.Payload, identity{UserID: "UBOT", TeamID: "T061EG9R6"})
	if err != nil || !ok || ev.ID != "Ev0PV52K21" || ev.Text != "Hello hello can you hear me?" || !ev.Direct {
		t.Errorf("payload decoded to %+v, %v, %v", ev, ok, err)
	}
}

func TestDecodeEnvelope(t *testing.T) {
	for _, tc := range []struct {
		name, frame string
		want        envelope // Payload compared as a string
		payload     string
		bad         bool
	}{
		{name: "fields", frame: `{"type":"interactive","envelope_id":"e1","payload":{"a":[1,"}",{"b":null}]},"accepts_response_payload":true,"retry_attempt":2,"retry_reason":"timeout"}`,
			want: envelope{Type: "interactive", EnvelopeID: "e1", AcceptsResponsePayload: true, RetryAttempt: 2, RetryReason: "timeout"}, payload: `{"a":[1,"}",{"b":null}]}`},
		{name: "keys in any case, the last one wins", frame: `{"TYPE":"x","Envelope_Id":"e1","type":"events_api"}`, want: envelope{Type: "events_api", EnvelopeID: "e1"}},
		{name: "a repeated key, the last one wins", frame: `{"type":"x","envelope_id":"e1","type":"events_api","n":1,"n":2}`, want: envelope{Type: "events_api", EnvelopeID: "e1"}},
		{name: "invalid UTF-8 taken, as encoding/json takes it", frame: "{\"type\":\"a\xffb\",\"payload\":\"\xfe\"}", want: envelope{Type: "a\ufffdb"}, payload: "\"\xfe\""},
		{name: "escapes", frame: `{"type":"events_api","envelope_id":"e\u00e9\n","p\u0061yload":"\"x\\"}`, want: envelope{Type: "events_api", EnvelopeID: "eé\n"}, payload: `"\"x\\"`},
		{name: "null leaves a field empty", frame: `{"type":null,"retry_attempt":null,"payload":null}`, payload: `null`},
		{name: "white space", frame: " \t\n{ \"type\" : \"hello\" , \"n\" : [ ] } \r\n", want: envelope{Type: "hello"}},
		{name: "empty object", frame: `{}`},
		{name: "null, which encoding/json takes as no fields", frame: " null\n"},
		{name: "null and more", frame: `null {}`, bad: true},
		{name: "numbers skipped", frame: `{"a":-0.5e+10,"b":0,"c":12E3,"type":"t"}`, want: envelope{Type: "t"}},
		{name: "not an object", frame: `["type"]`, bad: true},
		{name: "trailing bytes", frame: `{"type":"hello"}x`, bad: true},
		{name: "unterminated payload", frame: `{"type":"events_api","payload":{"a":"b"`, bad: true},
		{name: "bad escape", frame: `{"type":"a\x"}`, bad: true},
		{name: "control character", frame: "{\"type\":\"a\tb\"}", bad: true},
		{name: "type not a string", frame: `{"type":5}`, bad: true},
		{name: "retry_attempt not an integer", frame: `{"retry_attempt":1.5}`, bad: true},
		{name: "leading zero", frame: `{"n":01}`, bad: true},
		{name: "missing comma", frame: `{"type":"a" "envelope_id":"b"}`, bad: true},
		{name: "trailing comma", frame: `{"type":"a",}`, bad: true},
		{name: "bad literal", frame: `{"n":nul}`, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeEnvelope([]byte(tc.frame))
			var ref referenceEnvelope
			refErr := json.Unmarshal([]byte(tc.frame), &ref)
			if tc.bad {
				if err == nil || refErr == nil {
					t.Errorf("decoded %+v (err %v, encoding/json's %v), want an error from both", got, err, refErr)
				}
				return
			}
			if err != nil || refErr != nil {
				t.Fatalf("err %v, encoding/json's %v", err, refErr)
			}
			if string(got.Payload) != tc.payload {
				t.Errorf("payload %s, want %s", got.Payload, tc.payload)
			}
			got = withoutCallback(t, got)
			got.Payload = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("envelope\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestDecodeEnvelopeDepth: nesting is bounded where encoding/json bounds it.
func TestDecodeEnvelopeDepth(t *testing.T) {
	const bound = 10000 // encoding/json's
	for _, depth := range []int{bound - 1, bound, bound + 1} {
		// The frame's object is depth 1; the payload's arrays add depth-1.
		frame := `{"payload":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
		_, err := decodeEnvelope([]byte(frame))
		var ref referenceEnvelope
		refErr := json.Unmarshal([]byte(frame), &ref)
		if (err == nil) != (refErr == nil) {
			t.Errorf("depth %d: err %v, encoding/json's %v", depth, err, refErr)
		}
	}
}

// FuzzDecodeEnvelope holds decodeEnvelope to encoding/json: on a frame encoding/json reads
// into the envelope's fields, it reads the same fields and the same payload bytes; on one
// encoding/json refuses, it refuses too.
func FuzzDecodeEnvelope(f *testing.F) {
	for _, name := range []string{"hello.json", "disconnect_link_disabled.json", "events_api_message_im.json", "events_api_retry.json"} {
		f.Add(fixture(f, "socket/"+name))
	}
	f.Add([]byte(`{"type":"slash_commands","envelope_id":"e\u0031","payload":{"text":"\ud83d\ude00"},"accepts_response_payload":true}`))
	f.Add([]byte(`{"Type":"a","TYPE":null,"retry_attempt":-0,"x":[true,false,null,1e5,{"y":""}]}`))
	// Payloads read as callbacks where they stand: one, a repeated one whose last is no
	// object, one that is no callback (a wrong type), one before an invalid field, an
	// event_callback without an event_id.
	f.Add([]byte(`{"payload": {"type":"event_callback","event_id":"E1","event":{"type":"app_mention","text":"hi","ts":"1.2","channel":"C1","user":"U1"}} ,"type":"events_api","envelope_id":"e1"}`))
	f.Add([]byte(`{"payload":{"type":"event_callback","event_id":"E1","event":{}},"payload":null,"type":"events_api","envelope_id":"e2"}`))
	f.Add([]byte(`{"payload":{"type":"event_callback","event_id":"E1","event":{"text":5}},"type":"events_api","envelope_id":"e3"}`))
	f.Add([]byte(`{"payload":{"type":"event_callback","event_id":"E1","event":{}},"type":"events_api","retry_attempt":"1"}`))
	f.Add([]byte(`{"payload":{"type":"event_callback","event":{}},"type":"events_api","envelope_id":"e4"}`))
	f.Fuzz(func(t *testing.T, frame []byte) {
		got, err := decodeEnvelope(frame)
		var ref referenceEnvelope
		refErr := json.Unmarshal(frame, &ref)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("frame %q: err %v, encoding/json's %v", frame, err, refErr)
		}
		if err != nil {
			return
		}
		want := envelope{Type: ref.Type, EnvelopeID: ref.EnvelopeID, Payload: ref.Payload, AcceptsResponsePayload: ref.AcceptsResponsePayload,
			RetryAttempt: ref.RetryAttempt, RetryReason: ref.RetryReason, Reason: ref.Reason}
		if !bytes.Equal(got.Payload, want.Payload) {
			t.Fatalf("frame %q: payload %q, encoding/json's %q", frame, got.Payload, want.Payload)
		}
		got = withoutCallback(t, got)
		got.Payload, want.Payload = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("frame %q:\n got %+v\nwant %+v", frame, got, want)
		}
	})
}

// benchmarkFrame is an app_mention envelope as the fake Slack writes it, the frame of the
// ack scenario of loopbench.
func benchmarkFrame(b testing.TB) []byte {
	b.Helper()
	payload, err := json.Marshal(slackfake.MentionCallback("Ev1", "C1", "1700000000.000100", "", "<@UBOT> check the build"))
	if err != nil {
		b.Fatal(err)
	}
	frame, err := json.Marshal(map[string]any{"type": "events_api", "envelope_id": "env-1", "payload": json.RawMessage(payload),
		"accepts_response_payload": false, "retry_attempt": 0, "retry_reason": ""})
	if err != nil {
		b.Fatal(err)
	}
	return frame
}

// BenchmarkSocketFrameToEvent is the receiving loop's work for one app_mention envelope,
// from the frame's bytes to the bot.Event to accept: with slack-go's socketmode client
// (the frame read as a json.RawMessage, decoded into its Request, the payload parsed by
// slackevents, then read again by the adapter for an assistant thread and for a message:
// the path before the adapter had its own loop), and with decodeEnvelope, which reads the
// callback and its event in the frame's own pass.
func BenchmarkSocketFrameToEvent(b *testing.B) {
	frame := benchmarkFrame(b)
	self := identity{UserID: "UBOT", TeamID: "T1"}
	b.Run("slack-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var raw json.RawMessage
			if err := json.NewDecoder(bytes.NewReader(frame)).Decode(&raw); err != nil {
				b.Fatal(err)
			}
			var req struct {
				Type       string          `json:"type"`
				EnvelopeID string          `json:"envelope_id"`
				Payload    json.RawMessage `json:"payload"`
				Accepts    bool            `json:"accepts_response_payload"`
				Retry      int             `json:"retry_attempt"`
				Reason     string          `json:"retry_reason"`
			}
			if err := json.Unmarshal(raw, &req); err != nil {
				b.Fatal(err)
			}
			if _, err := slackevents.ParseEvent(req.Payload, slackevents.OptionNoVerifyToken()); err != nil {
				b.Fatal(err)
			}
			if _, _, ok, _ := decodeThreadStarted(req.Payload); ok {
				b.Fatal("a mention taken for a new assistant thread")
			}
			if _, _, ok, err := decodeMessage(req.Payload, self); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("envelope", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			e, err := decodeEnvelope(frame)
			if err != nil || !e.decoded {
				b.Fatal(err, e.decoded)
			}
			// The callback read with the envelope, as the receiving loop takes it.
			if _, _, ok, err := messageOf(e.callback, e.event, self); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
}

// BenchmarkDecodeEnvelope is the envelope's own fields alone, against encoding/json
// reading them.
func BenchmarkDecodeEnvelope(b *testing.B) {
	frame := benchmarkFrame(b)
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var ref referenceEnvelope
			if err := json.Unmarshal(frame, &ref); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("envelope", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeEnvelope(frame); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// withoutCallback checks that the callback decodeEnvelope read in its pass, if it read
// one, is what decodeCallback reads from the payload, and returns e without it.
func withoutCallback(t *testing.T, e envelope) envelope {
	t.Helper()
	if e.decoded {
		cb, m, err := decodeCallback(e.Payload)
		if err != nil || !reflect.DeepEqual(m, e.event) || !sameCallback(cb, e.callback) {
			t.Fatalf("payload %q: callback read with the envelope %+v %+v, decodeCallback's %+v %+v (err %v)", e.Payload, e.callback, e.event, cb, m, err)
		}
	}
	e.callback, e.event, e.decoded = callback{}, message{}, false
	return e
}

// sameCallback reports whether two decoded callbacks are the same, their events' bytes
// compared as bytes.
func sameCallback(a, b callback) bool {
	ea, eb := a.Event, b.Event
	a.Event, b.Event = nil, nil
	return reflect.DeepEqual(a, b) && bytes.Equal(ea, eb)
}

// TestDecodeEnvelopeReadsTheCallback: the payload of an app_mention envelope, as the fake
// Slack writes it, is read in the envelope's own pass, as decodeCallback reads it.
func TestDecodeEnvelopeReadsTheCallback(t *testing.T) {
	frame := benchmarkFrame(t)
	e, err := decodeEnvelope(frame)
	if err != nil {
		t.Fatal(err)
	}
	cb, m, err := decodeCallback(e.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if !e.decoded || !sameCallback(e.callback, cb) || !reflect.DeepEqual(e.event, m) || m.Text != "<@UBOT> check the build" {
		t.Errorf("envelope's callback %+v %+v (decoded %v), want decodeCallback's %+v %+v", e.callback, e.event, e.decoded, cb, m)
	}
}
