package main

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/adapters/discord/discordfake"
	"github.com/loopbot/loopbot/adapters/slack/slackfake"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// TestCheckOnline runs loopbot check -online against fakes of the model endpoint, Slack and
// Discord (the adapters' own fakes: the command has no chat client of its own): each
// credential is tried, and a refused one fails the command.
func TestCheckOnline(t *testing.T) {
	model := llmtest.NewTest(t, llmtest.Text("ok"), llmtest.Status(http.StatusUnauthorized, 0), llmtest.Text("ok"), llmtest.Text("ok"))
	slackSrv, err := slackfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slackSrv.Close)
	discordSrv, err := discordfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(discordSrv.Close)

	env := map[string]string{
		"OPENAI_BASE_URL":   model.URL(),
		"OPENAI_API_KEY":    "sk-test",
		"SLACK_BOT_TOKEN":   "xoxb-test",
		"SLACK_APP_TOKEN":   "xapp-test",
		"DISCORD_BOT_TOKEN": "discord-token",
	}
	cfg := writeConfig(t, "[store]\npath = \""+filepath.Join(t.TempDir(), "db")+"\"\n[llm]\nmax_retries = -1\n[slack]\napi_url = \""+slackSrv.APIURL()+
		"\"\n[discord]\napplication_id = \""+discordfake.AppID+"\"\napi_url = \""+discordSrv.URL()+"\"\n")
	run := func() (string, error) {
		var out bytes.Buffer
		m := NewMain()
		m.Stdout, m.Stderr = &out, &out
		m.Getenv = func(k string) string { return env[k] }
		if err := m.ParseFlags(context.Background(), []string{"-config", cfg, "check", "-online"}); err != nil {
			t.Fatal(err)
		}
		err := m.Run(context.Background())
		return out.String(), err
	}

	out, err := run()
	if err != nil {
		t.Fatalf("check -online: %v\n%s", err, out)
	}
	for _, want := range []string{"model endpoint: ok", "slack: ok: bot loopbot (" + slackfake.BotUserID + ") in workspace Fake",
		"discord: ok: bot loopbot (" + discordfake.BotID + ")", "discord invite URL: https://discord.com/oauth2/authorize?client_id=" + discordfake.AppID} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := len(slackSrv.CallsOf("auth.test")); n != 1 {
		t.Errorf("slack auth.test called %d times, want once", n)
	}
	if reqs := discordfake.Find(discordSrv.Requests(), http.MethodGet, "/api/v9/users/@me"); len(reqs) != 1 || reqs[0].Auth != "Bot discord-token" {
		t.Errorf("discord /users/@me requests: %s", discordfake.Describe(discordSrv.Requests()))
	}

	// The model endpoint refuses the key the second time.
	out, err = run()
	if err == nil || !strings.Contains(err.Error(), "model endpoint") || !strings.Contains(out, "model endpoint: FAILED") {
		t.Errorf("err = %v; output:\n%s", err, out)
	}
	if strings.Contains(out, "sk-test") {
		t.Errorf("the API key was printed:\n%s", out)
	}

	// Slack refuses the bot token, then Discord refuses its token: each fails the command by name.
	slackSrv.FailNext("auth.test", 1, slackfake.APIError("invalid_auth"))
	out, err = run()
	if err == nil || !strings.Contains(err.Error(), "slack") || !strings.Contains(out, "slack: FAILED: auth.test: invalid_auth") {
		t.Errorf("refused Slack token: err = %v; output:\n%s", err, out)
	}
	discordSrv.Fail(http.MethodGet, "/api/v9/users/@me", http.StatusUnauthorized, `{"message": "401: Unauthorized", "code": 0}`, nil)
	out, err = run()
	if err == nil || !strings.Contains(err.Error(), "discord") || !strings.Contains(out, "discord: FAILED: users/@me") {
		t.Errorf("refused Discord token: err = %v; output:\n%s", err, out)
	}
	for _, secret := range []string{"xoxb-test", "xapp-test", "discord-token"} {
		if strings.Contains(out, secret) {
			t.Errorf("the secret %q was printed:\n%s", secret, out)
		}
	}
}
