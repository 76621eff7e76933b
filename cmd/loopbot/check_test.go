package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slack-go/slack/slacktest"

	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// TestCheckOnline runs loopbot check -online against fakes of the model endpoint, Slack and
// Discord: each credential is tried, and a refused one fails the command.
func TestCheckOnline(t *testing.T) {
	model := llmtest.NewTest(t, llmtest.Text("ok"), llmtest.Status(http.StatusUnauthorized, 0))
	slackSrv := slacktest.NewTestServer()
	slackSrv.Start()
	t.Cleanup(slackSrv.Stop)
	discordSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v10/users/@me" || r.Header.Get("Authorization") != "Bot discord-token" {
			http.Error(w, `{"message": "401: Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"id":"42","username":"loopbot"}`))
	}))
	t.Cleanup(discordSrv.Close)

	env := map[string]string{
		"OPENAI_BASE_URL":   model.URL(),
		"OPENAI_API_KEY":    "sk-test",
		"SLACK_BOT_TOKEN":   "xoxb-test",
		"SLACK_APP_TOKEN":   "xapp-test",
		"DISCORD_BOT_TOKEN": "discord-token",
	}
	cfg := writeConfig(t, "[store]\npath = \""+filepath.Join(t.TempDir(), "db")+"\"\n[llm]\nmax_retries = -1\n[slack]\napi_url = \""+slackSrv.GetAPIURL()+
		"\"\n[discord]\napplication_id = \"123456\"\napi_url = \""+discordSrv.URL+"/\"\n")
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
	for _, want := range []string{"model endpoint: ok", "slack auth.test: ok", "discord /users/@me: ok", "bot loopbot (42)",
		"discord invite URL: https://discord.com/oauth2/authorize?client_id=123456"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// The model endpoint refuses the key the second time.
	out, err = run()
	if err == nil || !strings.Contains(err.Error(), "model endpoint") || !strings.Contains(out, "model endpoint: FAILED") {
		t.Errorf("err = %v; output:\n%s", err, out)
	}
	if strings.Contains(out, "sk-test") {
		t.Errorf("the API key was printed:\n%s", out)
	}
}
