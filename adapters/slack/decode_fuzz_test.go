package slack

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/loopbot/loopbot/adapters/slack/slackfake"
)

// FuzzDecodeCallback holds decodeCallback, which decodes on jsontext, to encoding/json: the
// same callback and message, or an error from both.
func FuzzDecodeCallback(f *testing.F) {
	for _, name := range []string{"events/app_mention_edited.json", "events/assistant_thread_started.json"} {
		f.Add(fixture(f, name))
	}
	mention, err := json.Marshal(slackfake.MentionCallback("Ev1", "C1", "1700000000.000100", "1699999999.000100", "<@UBOT> go &amp; see"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(mention)
	f.Add([]byte(`{"type":"event_callback","event_id":"Ev2","EVENT":{"Type":"message","text":"a\u00e9\ud83d\ude00","ts":"1.2","channel":"D1","edited":null},"authorizations":[{"team_id":"T9"}]}`))
	// encoding/json's corners: repeated keys (null leaving a string, an object merging into
	// the one before, an array into the elements the one before left), keys matched by
	// Unicode case folding ("ſ" is "s"), escaped keys and values, a lone surrogate.
	f.Add([]byte(`{"type":"event_callback","event_id":"E1","type":null,"event":{"type":"message","edited":{"user":"U1"},"edited":{"ts":"1"},"text":"t","text":null,"t\u0073":"2","tſ":"3"},` +
		`"authorizations":[{"team_id":"A"},{"team_id":"B"}],"authorizations":[{}],"authorizations":[null,{}]}`))
	f.Add([]byte(`{"type":"event_callback","event_id":"E2","event":{"user":"\ud800x","edited":{"ts":"1"},"edited":null},"authorizations":[{"team_id":"A"}],"authorizations":[]}`))
	f.Add([]byte(`{"type":"event_callback","event_id":"E4","event":{},"authorizations":[{"team_id":"A"},{"team_id":"B"}],"authorizations":[{}]}`))
	f.Add([]byte(`{"type":"event_callback","event_id":"E5","event":null,"authorizations":[]}`))
	// The event is read where it stands: a repeated event whose earlier value is no message
	// (encoding/json replaces it unread), a bad event in a callback of another type, an
	// event before the type, white space around its colon.
	f.Add([]byte(`{"type":"event_callback","event_id":"E6","event":{"type":5},"event":{"type":"message","text":"x","ts":"1","channel":"C1"}}`))
	f.Add([]byte(`{"type":"url_verification","event":{"type":5},"challenge":"c"}`))
	f.Add([]byte(`{"type":"event_callback","event_id":"E9","event":{"type":"message","user":"U9","edited":{"ts":"1"}},"event":{"type":"app_mention","text":"b"}}`))
	f.Add([]byte(`{"event" :` + "\t\n" + ` {"type":"message","text":"y"} ,"type":"event_callback","event_id":"E7","event_id":""}`))
	f.Add([]byte(`{"event":{"type":"message","text":"z"},"type":"event_callback","event_id":"E8"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"type":"event_callback","event_id":"E3"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		cb, m, err := decodeCallback(body)
		want := func() (cb callback, m message, err error) {
			if err := json.Unmarshal(body, &cb); err != nil {
				return callback{}, message{}, err
			}
			if cb.Type != "event_callback" {
				return cb, message{}, nil
			}
			if cb.EventID == "" {
				return callback{}, message{}, errors.New("no event_id")
			}
			if err := json.Unmarshal(cb.Event, &m); err != nil {
				return callback{}, message{}, err
			}
			return cb, m, nil
		}
		wcb, wm, werr := want()
		if (err == nil) != (werr == nil) {
			t.Fatalf("body %q: err %v, encoding/json's %v", body, err, werr)
		}
		if err != nil {
			return
		}
		// The raw event is compared as JSON values: either decoder may keep it as it came.
		if !reflect.DeepEqual(m, wm) || cb.Type != wcb.Type || cb.TeamID != wcb.TeamID || cb.EventID != wcb.EventID ||
			cb.Challenge != wcb.Challenge || !reflect.DeepEqual(cb.Authorizations, wcb.Authorizations) || string(cb.Event) != string(wcb.Event) {
			t.Fatalf("body %q:\n got %+v %+v\nwant %+v %+v", body, cb, m, wcb, wm)
		}
	})
}
