package discord

import (
	"strings"
	"testing"
)

func TestConfigCheck(t *testing.T) {
	good := Config{Token: "Bot abc", ApplicationID: "123"}
	key := strings.Repeat("ab", 32)
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none means valid
	}{
		{"gateway", good, nil},
		{"http", Config{Mode: "http", Token: "abc", ApplicationID: "123", PublicKey: key, ListenAddr: ":8080"}, nil},
		{"nothing", Config{}, []string{"discord token", "discord application_id"}},
		{"bad mode", Config{Mode: "socket", Token: "a", ApplicationID: "1"}, []string{"discord mode"}},
		{"http without key or address", Config{Mode: "http", Token: "a", ApplicationID: "1"}, []string{"discord public_key", "discord listen_addr"}},
		{"short key", Config{Mode: "http", Token: "a", ApplicationID: "1", PublicKey: "abcd", ListenAddr: ":1"}, []string{"discord public_key"}},
		{"bad ids", Config{Token: "a", ApplicationID: "app", GuildIDs: []string{"1", "g"}}, []string{"discord application_id", "discord guild_ids"}},
		{"bad api url", Config{Token: "a", ApplicationID: "1", APIURL: "discord.local"}, []string{"discord api_url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.check()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if got.Mode == "" || strings.HasPrefix(got.Token, "Bot ") {
					t.Errorf("defaults not filled: %+v", got)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestInviteURL(t *testing.T) {
	got := InviteURL("123")
	want := "https://discord.com/oauth2/authorize?client_id=123&permissions=311385246720&scope=bot+applications.commands"
	if got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}

func TestIntents(t *testing.T) {
	if got := intents(false); got != 1|1<<9|1<<12 {
		t.Errorf("intents without message content: %d", got)
	}
	if got := intents(true); got != 1|1<<9|1<<12|1<<15 {
		t.Errorf("intents with message content: %d", got)
	}
}
