package web

import (
	"strings"
	"testing"

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
		// The user is who the request was authenticated as (ann); a name in the body is
		// ignored, whatever it says.
		{"goal", bot.EventMention, `{"id":"` + uuid1 + `","text":"  fix it \n"}`,
			bot.Event{Kind: bot.EventMention, ID: "web:" + uuid1, User: bot.User{ID: "web:ann", Name: "ann"}, Text: "fix it"}, "", ""},
		{"forged user", bot.EventReply, `{"id":"` + uuid1 + `","user":"boss","text":"yes"}`,
			bot.Event{Kind: bot.EventReply, ID: "web:" + uuid1, User: bot.User{ID: "web:ann", Name: "ann"}, Text: "yes"}, "", ""},
		{"action", bot.EventAction, `{"id":"` + uuid1 + `","user":"bob","action":"abc123","thread":"t1"}`,
			bot.Event{Kind: bot.EventAction, ID: "web:" + uuid1, User: bot.User{ID: "web:ann", Name: "ann"}, ActionID: "abc123"}, "t1", ""},
		{"autonomy command", bot.EventReply, `{"id":"` + uuid1 + `","text":"/loopbot autonomy Careful"}`,
			bot.Event{Kind: bot.EventCommand, Command: bot.CommandAutonomy, ID: "web:" + uuid1, User: bot.User{ID: "web:ann", Name: "ann"}, Text: "Careful"}, "", ""},
		{"short autonomy command", bot.EventMention, `{"id":"` + uuid1 + `","text":"/autonomy"}`,
			bot.Event{Kind: bot.EventCommand, Command: bot.CommandAutonomy, ID: "web:" + uuid1, User: bot.User{ID: "web:ann", Name: "ann"}}, "", ""},
		{"a goal about autonomy", bot.EventMention, `{"id":"` + uuid1 + `","text":"autonomy of the team"}`,
			bot.Event{Kind: bot.EventMention, ID: "web:" + uuid1, User: bot.User{ID: "web:ann", Name: "ann"}, Text: "autonomy of the team"}, "", ""},
		{"not json", bot.EventMention, `{"id":`, bot.Event{}, "", "not the expected JSON object"},
		{"unknown field", bot.EventMention, `{"id":"` + uuid1 + `","user":"a","text":"x","admin":true}`, bot.Event{}, "", `unknown field "admin"`},
		{"trailing data", bot.EventMention, `{"id":"` + uuid1 + `","user":"a","text":"x"} {}`, bot.Event{}, "", "data after the JSON object"},
		{"array", bot.EventMention, `[]`, bot.Event{}, "", "not the expected JSON object"},
		{"no id", bot.EventMention, `{"user":"a","text":"x"}`, bot.Event{}, "", "id: want"},
		{"bad id", bot.EventMention, `{"id":"../../etc/passwd","user":"a","text":"x"}`, bot.Event{}, "", "id: want"},
		{"empty goal", bot.EventMention, `{"id":"` + uuid1 + `","user":"a","text":"  "}`, bot.Event{}, "", "text: required"},
		{"goal with action", bot.EventMention, `{"id":"` + uuid1 + `","user":"a","text":"x","action":"y"}`, bot.Event{}, "", "text only"},
		{"action without id", bot.EventAction, `{"id":"` + uuid1 + `","user":"a","thread":"t1"}`, bot.Event{}, "", "action: want"},
		{"action with text", bot.EventAction, `{"id":"` + uuid1 + `","user":"a","action":"x","thread":"t1","text":"hi"}`, bot.Event{}, "", "no text"},
		{"action bad thread", bot.EventAction, `{"id":"` + uuid1 + `","user":"a","action":"x","thread":"<t>"}`, bot.Event{}, "", "thread: want"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, thread, err := decodeRequest([]byte(tt.body), tt.kind, identity{name: "ann"})
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
		ev, thread, err := decodeRequest(body, kind, identity{name: "ann"})
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
		if ev.User != (bot.User{ID: "web:ann", Name: "ann"}) {
			t.Fatalf("user %+v, want the authenticated one", ev.User)
		}
		if kind == bot.EventAction && !validThreadID(thread) {
			t.Fatalf("thread %q", thread)
		}
	})
}
