package web

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/loopbot/loopbot/bot"
)

const uuid1 = "0b5d6c1e-4a8e-4f0a-9a55-3d7f2c1e9b10"

func TestDecodeRequest(t *testing.T) {
	tests := []struct {
		name    string
		kind    bot.EventKind
		body    string
		want    bot.Event
		thread  string
		wantErr string
	}{
		{"goal", bot.EventMention, `{"id":"` + uuid1 + `","user":" ann ","text":"  fix it \n"}`,
			bot.Event{Kind: bot.EventMention, ID: "web:" + uuid1, User: bot.User{ID: "web:ann", Name: "ann"}, Text: "fix it"}, "", ""},
		{"reply", bot.EventReply, `{"id":"` + uuid1 + `","user":"Bob Ó","text":"yes"}`,
			bot.Event{Kind: bot.EventReply, ID: "web:" + uuid1, User: bot.User{ID: "web:Bob Ó", Name: "Bob Ó"}, Text: "yes"}, "", ""},
		{"action", bot.EventAction, `{"id":"` + uuid1 + `","user":"bob","action":"abc123","thread":"t1"}`,
			bot.Event{Kind: bot.EventAction, ID: "web:" + uuid1, User: bot.User{ID: "web:bob", Name: "bob"}, ActionID: "abc123"}, "t1", ""},
		{"not json", bot.EventMention, `{"id":`, bot.Event{}, "", "not the expected JSON object"},
		{"unknown field", bot.EventMention, `{"id":"` + uuid1 + `","user":"a","text":"x","admin":true}`, bot.Event{}, "", `unknown field "admin"`},
		{"trailing data", bot.EventMention, `{"id":"` + uuid1 + `","user":"a","text":"x"} {}`, bot.Event{}, "", "data after the JSON object"},
		{"array", bot.EventMention, `[]`, bot.Event{}, "", "not the expected JSON object"},
		{"no id", bot.EventMention, `{"user":"a","text":"x"}`, bot.Event{}, "", "id: want"},
		{"bad id", bot.EventMention, `{"id":"../../etc/passwd","user":"a","text":"x"}`, bot.Event{}, "", "id: want"},
		{"no user", bot.EventMention, `{"id":"` + uuid1 + `","text":"x"}`, bot.Event{}, "", "user: a display name is required"},
		{"control in user", bot.EventMention, `{"id":"` + uuid1 + `","user":"a\u0000b","text":"x"}`, bot.Event{}, "", "user: letters"},
		{"long user", bot.EventMention, `{"id":"` + uuid1 + `","user":"` + strings.Repeat("a", 41) + `","text":"x"}`, bot.Event{}, "", "at most 40"},
		{"empty goal", bot.EventMention, `{"id":"` + uuid1 + `","user":"a","text":"  "}`, bot.Event{}, "", "text: required"},
		{"goal with action", bot.EventMention, `{"id":"` + uuid1 + `","user":"a","text":"x","action":"y"}`, bot.Event{}, "", "text only"},
		{"action without id", bot.EventAction, `{"id":"` + uuid1 + `","user":"a","thread":"t1"}`, bot.Event{}, "", "action: want"},
		{"action with text", bot.EventAction, `{"id":"` + uuid1 + `","user":"a","action":"x","thread":"t1","text":"hi"}`, bot.Event{}, "", "no text"},
		{"action bad thread", bot.EventAction, `{"id":"` + uuid1 + `","user":"a","action":"x","thread":"<t>"}`, bot.Event{}, "", "thread: want"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, thread, err := decodeRequest([]byte(tt.body), tt.kind)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || thread != tt.thread {
				t.Errorf("got %+v in %q, want %+v in %q", got, thread, tt.want, tt.thread)
			}
		})
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"id":"`+uuid1+`","user":"ann","text":"fix it"}`), uint8(0))
	f.Add([]byte(`{"id":"`+uuid1+`","user":"bob","action":"abc","thread":"t1"}`), uint8(2))
	f.Add([]byte(`{"id":"x","user":"\u0000","text":1}`), uint8(1))
	f.Add([]byte(`{}{}`), uint8(0))
	kinds := []bot.EventKind{bot.EventMention, bot.EventReply, bot.EventAction}
	f.Fuzz(func(t *testing.T, body []byte, k uint8) {
		kind := kinds[int(k)%len(kinds)]
		ev, thread, err := decodeRequest(body, kind)
		if err != nil {
			return
		}
		// What decodes must make a valid event once the handler puts it in a thread.
		if thread != "" {
			ev.Thread = threadRef(thread)
		} else {
			ev.Thread = threadRef("t1")
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("decoded an invalid event: %v", err)
		}
		if ev.Kind != kind || !strings.HasPrefix(ev.ID, userPrefix) || ev.User.ID != userPrefix+ev.User.Name {
			t.Fatalf("event %+v", ev)
		}
		if !utf8.ValidString(ev.User.Name) || strings.ContainsFunc(ev.User.Name, func(r rune) bool { return !unicode.IsPrint(r) }) {
			t.Fatalf("user name %q", ev.User.Name)
		}
		if kind == bot.EventAction && !validThreadID(thread) {
			t.Fatalf("thread %q", thread)
		}
	})
}
