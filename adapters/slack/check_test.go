package slack

import (
	"context"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/adapters/slack/slackfake"
)

func TestCheckOnline(t *testing.T) {
	f := newFakeSlack(t)
	cfg := Config{BotToken: "xoxb-test", AppToken: "xapp-1-test", APIURL: f.APIURL()}

	who, err := CheckOnline(context.Background(), cfg)
	if err != nil {
		t.Fatalf("CheckOnline: %v", err)
	}
	if want := "bot loopbot (" + botUserID + ") in workspace Fake (" + teamID + ")"; who != want {
		t.Errorf("CheckOnline = %q, want %q", who, want)
	}
	calls := f.CallsOf("auth.test")
	if len(calls) != 1 {
		t.Fatalf("auth.test was called %d times, want once", len(calls))
	}
	if n := len(f.Calls()); n != 1 {
		t.Errorf("CheckOnline made %d calls, want only auth.test: %+v", n, f.Calls())
	}

	// A refused token is an error naming the call and Slack's reason.
	f.FailNext("auth.test", 1, slackfake.APIError("invalid_auth"))
	if _, err := CheckOnline(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "auth.test") || !strings.Contains(err.Error(), "invalid_auth") {
		t.Errorf("refused token: err = %v, want auth.test: invalid_auth", err)
	}

	// A configuration New refuses fails before any call.
	before := len(f.Calls())
	if _, err := CheckOnline(context.Background(), Config{BotToken: "xoxb-test", APIURL: f.APIURL()}); err == nil || !strings.Contains(err.Error(), "AppToken") {
		t.Errorf("socket mode without an app token: err = %v", err)
	}
	if len(f.Calls()) != before {
		t.Error("CheckOnline called Slack with a configuration it should have refused")
	}
}
