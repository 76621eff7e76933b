package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/adapters/slack/slackfake"
	"github.com/loopbot/loopbot/bot"
)

func testAdapter(t *testing.T, f *fakeSlack) *Adapter {
	t.Helper()
	a, err := New(Config{BotToken: "xoxb-test", AppToken: "xapp-1-test", APIURL: f.apiURL()})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var thread = bot.ThreadRef{Platform: "slack", Workspace: teamID, Channel: "C1", Thread: "1700000000.000100"}

func TestPostUpdateNotify(t *testing.T) {
	f := newFakeSlack(t)
	a := testAdapter(t, f)
	ctx := context.Background()
	card := bot.Message{Kind: bot.KindStatus, Title: "Working", Text: "goal", Buttons: []bot.Button{{ID: "cancel-id", Label: "Cancel", Style: bot.StyleDanger}}}
	ref, err := a.Post(ctx, thread, card)
	if err != nil {
		t.Fatal(err)
	}
	c := f.nextCall("chat.postMessage")
	if c.Values.Get("channel") != "C1" || c.Values.Get("thread_ts") != thread.Thread || !strings.Contains(c.Values.Get("blocks"), `"value":"cancel-id"`) {
		t.Errorf("post %v", c.Values)
	}
	if ref.Thread != thread || ref.ID == "" {
		t.Errorf("ref %+v", ref)
	}
	card.Buttons = nil
	if err := a.Update(ctx, ref, card); err != nil {
		t.Fatal(err)
	}
	c = f.nextCall("chat.update")
	if c.Values.Get("ts") != ref.ID || c.Values.Get("channel") != "C1" || c.Values.Get("blocks") == "" || strings.Contains(c.Values.Get("blocks"), "cancel-id") {
		t.Errorf("update %v", c.Values)
	}
	if err := a.Notify(ctx, thread, "U1", "only <you>"); err != nil {
		t.Fatal(err)
	}
	c = f.nextCall("chat.postEphemeral")
	if c.Values.Get("user") != "U1" || c.Values.Get("text") != "only &lt;you&gt;" || c.Values.Get("thread_ts") != thread.Thread {
		t.Errorf("ephemeral %v", c.Values)
	}
}

// TestPostLongAnswer posts an answer longer than one message holds as consecutive
// messages in the thread.
func TestPostLongAnswer(t *testing.T) {
	f := newFakeSlack(t)
	a := testAdapter(t, f)
	text := strings.Repeat("All work and no play makes Jack a dull boy.\n", 2000) // 88,000 characters
	ref, err := a.Post(context.Background(), thread, bot.Message{Kind: bot.KindAnswer, Text: text})
	if err != nil {
		t.Fatal(err)
	}
	var total int
	for i := range 3 {
		c := f.nextCall("chat.postMessage")
		if i == 0 && ref.ID == "" {
			t.Error("no ref")
		}
		if c.Values.Get("thread_ts") != thread.Thread || runeLen(c.Values.Get("text")) > maxMessageText {
			t.Errorf("part %d: thread %q, text of %d", i, c.Values.Get("thread_ts"), runeLen(c.Values.Get("text")))
		}
		total += strings.Count(c.Values.Get("text"), "Jack")
	}
	if total != 2000 {
		t.Errorf("%d lines posted, want 2000", total)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name      string
		answer    slackfake.Failure
		retry     time.Duration // > 0: want a RateLimitError with this wait
		permanent bool
	}{
		{"429 with Retry-After", slackfake.RateLimited(7 * time.Second), 7 * time.Second, false},
		{"429 without Retry-After", slackfake.Failure{Status: http.StatusTooManyRequests}, defaultRetryAfter, false},
		{"channel_not_found", slackfake.APIError("channel_not_found"), 0, true},
		{"invalid_blocks", slackfake.APIError("invalid_blocks"), 0, true},
		{"404", slackfake.Failure{Status: http.StatusNotFound}, 0, true},
		{"500", slackfake.ServerError(), 0, false},
		{"fatal_error", slackfake.APIError("fatal_error"), 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSlack(t)
			f.FailNext("chat.update", 1, tc.answer)
			a := testAdapter(t, f)
			err := a.Update(context.Background(), bot.MessageRef{Thread: thread, ID: "1700000001.000001"}, bot.Message{Kind: bot.KindStatus, Text: "x"})
			if err == nil {
				t.Fatal("no error")
			}
			rl, isRL := errors.AsType[*bot.RateLimitError](err)
			_, isPerm := errors.AsType[*bot.PermanentError](err)
			switch {
			case tc.retry > 0 && (!isRL || rl.RetryAfter != tc.retry):
				t.Errorf("%v: want RateLimitError after %s", err, tc.retry)
			case tc.retry == 0 && isRL:
				t.Errorf("%v: not a rate limit", err)
			case isPerm != tc.permanent:
				t.Errorf("%v: permanent %v, want %v", err, isPerm, tc.permanent)
			}
		})
	}
}

func TestBadButtonIsPermanent(t *testing.T) {
	f := newFakeSlack(t)
	a := testAdapter(t, f)
	_, err := a.Post(context.Background(), thread, bot.Message{Kind: bot.KindApproval, Buttons: []bot.Button{{ID: strings.Repeat("x", maxButtonValue+1), Label: "Approve"}}})
	if _, ok := errors.AsType[*bot.PermanentError](err); !ok || !errors.Is(err, errBadButton) {
		t.Fatalf("err %v, want a permanent bad button error", err)
	}
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		cfg   Config
		field string // "" = valid
	}{
		{Config{BotToken: "xoxb-1", AppToken: "xapp-1"}, ""},
		{Config{Mode: ModeHTTP, BotToken: "xoxb-1", SigningSecret: "s"}, ""},
		{Config{AppToken: "xapp-1"}, "BotToken"},
		{Config{BotToken: "xapp-1", AppToken: "xapp-1"}, "BotToken"},
		{Config{BotToken: "xoxb-1"}, "AppToken"},
		{Config{BotToken: "xoxb-1", AppToken: "xoxb-2"}, "AppToken"},
		{Config{Mode: ModeHTTP, BotToken: "xoxb-1"}, "SigningSecret"},
		{Config{Mode: "rtm", BotToken: "xoxb-1"}, "Mode"},
		{Config{BotToken: "xoxb-1", AppToken: "xapp-1", APIURL: "ftp://x"}, "APIURL"},
		{Config{BotToken: "xoxb-1", AppToken: "xapp-1", AllowedChannels: []string{"#general"}}, "AllowedChannels"},
		{Config{BotToken: "xoxb-1", AppToken: "xapp-1", DrainTimeout: -1}, "DrainTimeout"},
		{Config{BotToken: "xoxb-1", AppToken: "xapp-1", Command: "/ask"}, ""},
		{Config{BotToken: "xoxb-1", AppToken: "xapp-1", Assistant: true, SuggestedPrompts: []string{}}, ""},
		{Config{BotToken: "xoxb-1", AppToken: "xapp-1", SuggestedPrompts: []string{"a", "b", "c", "d", "e"}}, "SuggestedPrompts"},
		{Config{BotToken: "xoxb-1", AppToken: "xapp-1", SuggestedPrompts: []string{"a", " "}}, "SuggestedPrompts"},
		{Config{BotToken: "xoxb-1", AppToken: "xapp-1", Command: "loopbot"}, "Command"},
		{Config{BotToken: "xoxb-1", AppToken: "xapp-1", Command: "/loop bot"}, "Command"},
	}
	for _, tc := range tests {
		_, err := New(tc.cfg)
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v", tc.cfg, err)
		case tc.field != "" && (err == nil || !strings.Contains(err.Error(), tc.field+":")):
			t.Errorf("%+v: error %v, want one naming %s", tc.cfg, err, tc.field)
		}
	}
}

// TestRenderedJSONIsBlockKit checks that what is posted parses back as Slack blocks.
func TestRenderedJSONIsBlockKit(t *testing.T) {
	parts, err := render(bot.Message{Kind: bot.KindApproval, Title: "Run shell?", Text: "why", Fields: []bot.Field{{Name: "command", Value: "ls", Code: true}},
		Buttons: []bot.Button{{ID: "a", Label: "Approve", Style: bot.StylePrimary}, {ID: "r", Label: "Reject", Style: bot.StyleDanger, Confirm: "Sure?"}}}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(parts[0].Blocks)
	var back []map[string]any
	if err := json.Unmarshal(b, &back); err != nil || len(back) != 4 {
		t.Fatalf("%s: %v", b, err)
	}
}
