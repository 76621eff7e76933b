package discord

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/adapters/discord/discordfake"
)

func TestCheckOnline(t *testing.T) {
	f := NewFakeDiscord(t)
	cfg := Config{Token: "test-token", ApplicationID: discordfake.AppID, APIURL: f.URL()}

	who, err := CheckOnline(context.Background(), cfg)
	if err != nil {
		t.Fatalf("CheckOnline: %v", err)
	}
	if want := "bot loopbot (" + discordfake.BotID + ")"; who != want {
		t.Errorf("CheckOnline = %q, want %q", who, want)
	}
	reqs := f.Requests()
	if len(reqs) != 1 || reqs[0].Method != http.MethodGet || !strings.HasSuffix(reqs[0].Path, "/users/@me") {
		t.Fatalf("requests = %s, want one GET of /users/@me", discordfake.Describe(reqs))
	}
	if reqs[0].Auth != "Bot test-token" {
		t.Errorf("Authorization = %q, want the bot token", reqs[0].Auth)
	}

	// A refused token is an error naming the route and the status.
	f.Fail(http.MethodGet, "/api/v9/users/@me", http.StatusUnauthorized, `{"message": "401: Unauthorized", "code": 0}`, nil)
	if _, err := CheckOnline(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "users/@me") || !strings.Contains(err.Error(), "401") {
		t.Errorf("refused token: err = %v, want users/@me and 401", err)
	}

	// A configuration New refuses fails before any request.
	before := len(f.Requests())
	if _, err := CheckOnline(context.Background(), Config{Token: "test-token", APIURL: f.URL()}); err == nil || !strings.Contains(err.Error(), "application_id") {
		t.Errorf("no application ID: err = %v", err)
	}
	if len(f.Requests()) != before {
		t.Error("CheckOnline called Discord with a configuration it should have refused")
	}
}
