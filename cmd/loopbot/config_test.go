package main

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/tools"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "loopbot.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func noEnv(string) string { return "" }

func TestLoadConfigErrorsNameKeyAndLine(t *testing.T) {
	tests := []struct {
		name, body string
		want       []string
	}{
		{"unknown key", "[llm]\nmodel = \"x\"\nmodle = \"y\"\n", []string{":3:1:", `unknown key "llm.modle"`}},
		{"unknown section", "[store]\npath = \"a.db\"\n\n[slak]\ntoken = \"x\"\n", []string{":4:", `"slak`}},
		{"wrong type", "[agent]\nmax_steps = \"ten\"\n", []string{":2:", "max_steps"}},
		{"bad duration", "[agent]\nmax_wall = \"forever\"\n", []string{":2:", "want a duration"}},
		{"bad risk", "[agent.risk]\nshell = \"spicy\"\n", []string{"agent.risk.shell", "unknown risk level"}},
		{"bad handling", "[agent]\nfailure_handling = \"panic\"\n", []string{"failure_handling", "ask_user"}},
		{"broken toml", "[llm\nmodel = 1\n", []string{":1:"}},
		{"bad log level", "[log]\nlevel = \"loud\"\n", []string{"log.level"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig(writeConfig(t, tt.body), noEnv)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadConfigPrecedence(t *testing.T) {
	p := writeConfig(t, "[llm]\napi_key = \"from-file\"\nmodel = \"m\"\n[agent]\nmax_wall = \"5m\"\n[agent.risk]\nhttp_fetch = \"confirm\"\n")
	cfg, err := LoadConfig(p, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.APIKey != "from-file" || cfg.LLM.Model != "m" || cfg.Store.Path != "loopbot.db" {
		t.Errorf("file over defaults: %+v", cfg)
	}
	ac, _ := cfg.AgentConfig()
	if ac.MaxWall != 5*time.Minute || ac.RiskFloor["http_fetch"] != agent.RiskConfirm {
		t.Errorf("agent config = %+v", ac)
	}
	env := map[string]string{"OPENAI_API_KEY": "from-env"}
	cfg, err = LoadConfig(p, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.APIKey != "from-env" {
		t.Errorf("env did not override the file: %q", cfg.LLM.APIKey)
	}
}

func TestExampleConfigIsValidAndComplete(t *testing.T) {
	cfg, err := LoadConfig("../../config.example.toml", noEnv)
	if err != nil {
		t.Fatalf("config.example.toml does not load: %v", err)
	}
	if cfg.Store.Path == "" {
		t.Error("the example leaves store.path empty")
	}
	data, err := os.ReadFile("../../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	documented := exampleKeys(string(data))
	for _, key := range configKeys(reflect.TypeOf(Config{}), "") {
		if !documented[key] {
			t.Errorf("config.example.toml does not document %s", key)
		}
	}
}

// exampleKeys lists the keys a config file shows, commented out or not, as section.key.
func exampleKeys(text string) map[string]bool {
	keys := map[string]bool{}
	section := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#"))
		switch {
		case strings.HasPrefix(line, "[["):
			section = strings.Trim(line, "[] ")
			keys[section] = true
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[] ")
			keys[section] = true
		case strings.Contains(line, "="):
			k := strings.TrimSpace(line[:strings.Index(line, "=")])
			if k != "" && !strings.ContainsAny(k, " \"") {
				keys[section+"."+k] = true
			}
		}
	}
	return keys
}

// configKeys lists every key of the config struct as section.key; a map is one key (its
// table).
func configKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			continue
		}
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		switch {
		case f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(Duration(0)):
			out = append(out, configKeys(f.Type, key)...)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			out = append(out, configKeys(f.Type.Elem(), key)...)
		default:
			out = append(out, key)
		}
	}
	return out
}

func FuzzDecodeConfig(f *testing.F) {
	f.Add([]byte("[llm]\nmodel = \"x\"\n"))
	f.Add([]byte("[agent]\nmax_wall = \"1m\"\n[agent.risk]\nshell = \"safe\"\n"))
	f.Add([]byte("[[x]]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := DefaultConfig()
		if err := decodeConfig("fuzz.toml", data, &cfg); err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.toml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		_ = cfg.Check()
	})
}

// TestSecretValues checks which configured values the bot redacts: every credential, and the
// values of MCP environment variables and headers named like credentials, but nothing short or
// ordinary, which would blank out common words.
func TestSecretValues(t *testing.T) {
	var cfg Config
	cfg.LLM.APIKey = "sk-proj-0123456789"
	cfg.Slack.BotToken = "xoxb-1-2-abcdefgh"
	cfg.Web.Token = "short"
	cfg.MCP.Servers = []tools.MCPServerConfig{{
		Name:    "gh",
		Env:     map[string]string{"GITHUB_TOKEN": "ghp_canary0123456789", "LOG_LEVEL": "debugging", "DB_PASSWORD": "hunter2hunter2"},
		Headers: map[string]string{"Authorization": "Bearer mcp-canary-abcdef", "Accept": "application/json"},
	}}
	got := secretValues(cfg)
	for _, want := range []string{"sk-proj-0123456789", "xoxb-1-2-abcdefgh", "ghp_canary0123456789", "hunter2hunter2", "Bearer mcp-canary-abcdef", "mcp-canary-abcdef"} {
		if !slices.Contains(got, want) {
			t.Errorf("secretValues lacks %q: %q", want, got)
		}
	}
	for _, not := range []string{"short", "debugging", "application/json"} {
		if slices.Contains(got, not) {
			t.Errorf("secretValues redacts the ordinary value %q", not)
		}
	}
}
