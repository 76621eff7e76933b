package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"

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
		{"bare number duration", "[agent]\nmax_wall = 30\n", []string{":2:12:", "agent.max_wall", "needs a unit"}},
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
	if ac := cfg.Agent; time.Duration(ac.MaxWall) != 5*time.Minute || ac.RiskFloor["http_fetch"] != agent.RiskConfirm {
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
		if f.Anonymous && name == "" {
			// An embedded package Config: its keys are the section's own.
			out = append(out, configKeys(f.Type, prefix)...)
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		switch {
		case f.Type.Kind() == reflect.Struct:
			out = append(out, configKeys(f.Type, key)...)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			out = append(out, configKeys(f.Type.Elem(), key)...)
		default:
			out = append(out, key)
		}
	}
	return out
}

// FuzzDecodeConfig feeds the decoder arbitrary files: it must not panic, every line of an
// error names the file, no error shows a Go type name, and a file that decodes passes Check
// or fails it without a panic.
func FuzzDecodeConfig(f *testing.F) {
	f.Add([]byte("[llm]\nmodel = \"x\"\n"))
	f.Add([]byte("[agent]\nmax_wall = \"1m\"\n[agent.risk]\nshell = \"safe\"\n"))
	f.Add([]byte("[[x]]\n"))
	f.Add([]byte("[agent]\nmax_wall = 30\nmax_steps = \"ten\"\n"))
	f.Add([]byte("agent = { max_wall = 1.5, risk = { a = 1 } }\n"))
	f.Add([]byte("[[mcp.servers]]\nname = 1\nenv = { A = [1] }\ntimeout = true\n"))
	f.Add([]byte("[web]\nmax_threads = 0x7fffffffffffffffff\n[agent.max_steps]\n"))
	f.Add([]byte("[slack]\nallowed_channels = [[1], {a = 2}]\n"))
	if data, err := os.ReadFile("../../config.example.toml"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := DefaultConfig()
		if err := decodeConfig("fuzz.toml", data, &cfg); err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "fuzz.toml") {
					t.Fatalf("error line does not name the file: %q", line)
				}
			}
			if m := showsGoType(err); m != "" {
				t.Fatalf("error %q shows the Go type name %q", err, m)
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

// goTypeName matches what a Go type looks like in an error (go-toml says "struct field X of
// type int"): the file's editor never sees one.
var goTypeName = regexp.MustCompile(`struct field|of type|struct \{|map\[|\[\]\w|\bu?int(8|16|32|64)?\b|\bfloat(32|64)\b|\w\.(Duration|Risk|Config|Price)\b`)

// quoted is a quoted part of an error: a key or value from the file, not the decoder's words.
var quoted = regexp.MustCompile(`"[^"]*"`)

// showsGoType returns a Go type name shown by the decoder's own words in err, leaving out
// what comes from the file: quoted text and the key each line starts with.
func showsGoType(err error) string {
	for _, line := range strings.Split(err.Error(), "\n") {
		line = quoted.ReplaceAllString(line, `""`)
		if i := strings.LastIndex(line, ": "); i >= 0 {
			line = line[i+2:] // the message after file:line:col: and the key
		}
		if m := goTypeName.FindString(line); m != "" {
			return m
		}
	}
	return ""
}

// TestDecodeConfigWrongTypes checks the first pass of the decoder: a value of the wrong TOML
// type is an error naming the file, the line, the key and what the key wants in plain words;
// a bare number where a duration belongs is refused in every section that has one.
func TestDecodeConfigWrongTypes(t *testing.T) {
	const unit = `a duration needs a unit, like "30s" or "5m"`
	tests := []struct {
		name, body string
		// want are in the error; those that start with the file name are one line each.
		want []string
	}{
		{"bare number max_wall", "[agent]\nmax_wall = 30\n", []string{"x.toml:2:12: agent.max_wall: " + unit}},
		{"decimal max_wall", "[agent]\n\nmax_wall = 1.5\n", []string{"x.toml:3:12: agent.max_wall: " + unit}},
		{"quoted bare number", "[agent]\nmax_wall = \"30\"\n", []string{"x.toml:2:12: agent.max_wall: " + unit}},
		{"tool_timeout", "[agent]\ntool_timeout = 120\n", []string{"x.toml:2:16: agent.tool_timeout: " + unit}},
		{"bot duration", "[bot]\nedit_interval = 1\n", []string{"x.toml:2:17: bot.edit_interval: " + unit}},
		{"bot policy duration", "[bot.policy]\napproval_expiry = 1800\n", []string{"x.toml:2:19: bot.policy.approval_expiry: " + unit}},
		{"llm duration", "[llm]\ntimeout = 120\n", []string{"x.toml:2:11: llm.timeout: " + unit}},
		{"tools duration", "[tools.shell]\ntimeout = 60\n", []string{"x.toml:2:11: tools.shell.timeout: " + unit}},
		{"mcp duration", "[mcp]\nmin_backoff = 1\n", []string{"x.toml:2:15: mcp.min_backoff: " + unit}},
		{"mcp server duration", "[[mcp.servers]]\nname = \"a\"\ncommand = \"x\"\ntimeout = 5\n", []string{"x.toml:4:11: mcp.servers.timeout: " + unit}},
		{"store duration", "[store]\nlock_timeout = 1\n", []string{"x.toml:2:16: store.lock_timeout: " + unit}},
		{"dotted key duration", "agent.max_wall = 30\n", []string{"x.toml:1:18: agent.max_wall: " + unit}},
		{"inline table duration", "agent = { max_wall = 30 }\n", []string{"x.toml:1:22: agent.max_wall: " + unit}},
		{"duration as bool", "[agent]\nmax_wall = true\n", []string{`x.toml:2:12: agent.max_wall: want a duration with a unit, like "30s" or "5m", not true or false`}},
		{"duration as date", "[agent]\nmax_wall = 2026-01-01\n", []string{`agent.max_wall: want a duration with a unit, like "30s" or "5m", not a date or time`}},
		{"negative duration", "[agent]\nmax_wall = \"-5m\"\n", []string{"x.toml:2:", "agent.max_wall", "negative"}},
		{"text for a whole number", "[agent]\nmax_steps = \"ten\"\n", []string{"x.toml:2:13: agent.max_steps: want a whole number, not text"}},
		{"decimal for a whole number", "[agent]\nmax_steps = 1.5\n", []string{"x.toml:2:13: agent.max_steps: want a whole number, not a decimal number"}},
		{"text for a number", "[agent]\nmax_cost = \"1\"\n", []string{"x.toml:2:12: agent.max_cost: want a number, not text"}},
		{"number for text", "[slack]\nbot_token = 5\n", []string{"x.toml:2:13: slack.bot_token: want text, not a number"}},
		{"text for true or false", "[web]\nenabled = \"yes\"\n", []string{"x.toml:2:11: web.enabled: want true or false, not text"}},
		{"text for a list", "[slack]\nallowed_channels = \"C1\"\n", []string{"x.toml:2:20: slack.allowed_channels: want a list of text, not text"}},
		{"number in a list", "[discord]\nguild_ids = [\"1\", 2]\n", []string{"x.toml:2:19: discord.guild_ids[1]: want text, not a number"}},
		{"number for a section", "llm = 5\n", []string{"x.toml:1:7: llm: want a table, not a number"}},
		{"section for a number", "[agent.max_steps]\n", []string{"x.toml:1:8: agent.max_steps: want a whole number, not a table"}},
		{"number for a risk", "[tools.http_fetch]\nrisk = 3\n", []string{`x.toml:2:8: tools.http_fetch.risk: want a risk level ("safe", "cautious", "confirm" or "dangerous"), not a number`}},
		{"number in the risk table", "[agent.risk]\nshell = 1\n", []string{"x.toml:2:9: agent.risk.shell: want a risk level"}},
		{"dotted key through a value", "[agent.risk]\ns.x = \"safe\"\n", []string{`x.toml:2:3: agent.risk.s: want a risk level ("safe", "cautious", "confirm" or "dangerous"), not a table`}},
		{"section through a value", "[slack.mode.x]\n", []string{"x.toml:1:13: slack.mode: want text, not a table"}},
		{"server field", "[[mcp.servers]]\nname = 1\n", []string{"x.toml:2:8: mcp.servers.name: want text, not a number"}},
		{"inline table entry", "[[mcp.servers]]\nname = \"a\"\ncommand = \"x\"\nenv = { A = 1 }\n", []string{"x.toml:4:13: mcp.servers.env.A: want text, not a number"}},
		{"list of tables", "[mcp]\nservers = [{ name = 2 }]\n", []string{"x.toml:2:21: mcp.servers[0].name: want text, not a number"}},
		{"out of range", "[web]\nmax_threads = 99999999999999999999\n", []string{"x.toml:2:15: web.max_threads: 99999999999999999999 is out of range"}},
		{"optional number", "[llm]\ntemperature = \"hot\"\n", []string{"x.toml:2:15: llm.temperature: want a number, not text"}},
		{"every error at once", "[agent]\nmax_wall = 30\nmax_steps = \"ten\"\n[bot]\nedit_interval = 1\n", []string{
			"x.toml:2:12: agent.max_wall: " + unit,
			"x.toml:3:13: agent.max_steps: want a whole number, not text",
			"x.toml:5:17: bot.edit_interval: " + unit,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			err := decodeConfig("x.toml", []byte(tt.body), &cfg)
			if err == nil {
				t.Fatalf("no error; agent.max_wall = %v", time.Duration(cfg.Agent.MaxWall))
			}
			lines := 0
			for _, w := range tt.want {
				if strings.HasPrefix(w, "x.toml:") {
					lines++
				}
			}
			if got := strings.Count(err.Error(), "\n") + 1; got != max(lines, 1) {
				t.Fatalf("%d error lines, want %d:\n%v", got, max(lines, 1), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if m := showsGoType(err); m != "" {
				t.Errorf("error %q shows the Go type name %q", err, m)
			}
		})
	}
}

// TestDecodeConfigAccepts checks values of the right type in every shape TOML allows.
func TestDecodeConfigAccepts(t *testing.T) {
	body := `tools.workspace = "ws"
llm = { timeout = "0", temperature = 0 }
[agent]
max_wall = "90s"
max_cost = 2
tool_timeout = "1m30s"
[agent.risk]
shell = "dangerous"
[bot.policy]
approval_expiry = "1h"
dangerous_needs_other = false
[web]
max_threads = 0x10
[slack]
allowed_channels = ["C1", "C2"]
[[mcp.servers]]
name = "a"
command = "x"
env = { A = "1" }
tool_risk = { t = "safe" }
timeout = "5s"
`
	cfg := DefaultConfig()
	if err := decodeConfig("x.toml", []byte(body), &cfg); err != nil {
		t.Fatal(err)
	}
	switch {
	case time.Duration(cfg.Agent.MaxWall) != 90*time.Second, time.Duration(cfg.Agent.ToolTimeout) != 90*time.Second:
		t.Errorf("agent durations: %v, %v", time.Duration(cfg.Agent.MaxWall), time.Duration(cfg.Agent.ToolTimeout))
	case cfg.LLM.Timeout != 0 || cfg.LLM.Temperature == nil || *cfg.LLM.Temperature != 0 || cfg.LLM.Model != "gpt-4o-mini":
		t.Errorf("llm: %v", cfg.LLM)
	case cfg.Agent.MaxCost != 2 || cfg.Agent.RiskFloor["shell"] != agent.RiskDangerous:
		t.Errorf("agent: %+v", cfg.Agent)
	case time.Duration(cfg.Bot.Policy.ApprovalExpiry) != time.Hour || cfg.Bot.Policy.DangerousNeedsOther == nil || *cfg.Bot.Policy.DangerousNeedsOther:
		t.Errorf("bot: %+v", cfg.Bot)
	case cfg.Web.MaxThreads != 16 || cfg.Web.Addr != "127.0.0.1:8080":
		t.Errorf("web: %+v", cfg.Web)
	case len(cfg.Slack.AllowedChannels) != 2:
		t.Errorf("slack: %+v", cfg.Slack)
	case len(cfg.MCP.Servers) != 1 || cfg.MCP.Servers[0].Env["A"] != "1" || cfg.MCP.Servers[0].ToolRisk["t"] != agent.RiskSafe ||
		time.Duration(cfg.MCP.Servers[0].Timeout) != 5*time.Second:
		t.Errorf("mcp: %+v", cfg.MCP)
	}
	if got := cfg.ToolsConfig().MCP.Servers; len(got) != 1 {
		t.Errorf("ToolsConfig lost [mcp]: %+v", got)
	}
}

// TestLoadConfigEnvironment checks every environment override: each wins over the file, and
// an empty variable leaves the file's value.
func TestLoadConfigEnvironment(t *testing.T) {
	p := writeConfig(t, `[llm]
api_key = "file"
base_url = "http://file.example/v1"
[web]
token = "file-token-0123456789"
[slack]
bot_token = "xoxb-file"
app_token = "xapp-file"
signing_secret = "file"
[discord]
token = "file"
public_key = "file"
`)
	tests := []struct {
		env  string
		got  func(Config) string
		file string
	}{
		{"OPENAI_API_KEY", func(c Config) string { return c.LLM.APIKey }, "file"},
		{"OPENAI_BASE_URL", func(c Config) string { return c.LLM.BaseURL }, "http://file.example/v1"},
		{"LOOPBOT_WEB_TOKEN", func(c Config) string { return c.Web.Token }, "file-token-0123456789"},
		{"SLACK_BOT_TOKEN", func(c Config) string { return c.Slack.BotToken }, "xoxb-file"},
		{"SLACK_APP_TOKEN", func(c Config) string { return c.Slack.AppToken }, "xapp-file"},
		{"SLACK_SIGNING_SECRET", func(c Config) string { return c.Slack.SigningSecret }, "file"},
		{"DISCORD_BOT_TOKEN", func(c Config) string { return c.Discord.Token }, "file"},
		{"DISCORD_PUBLIC_KEY", func(c Config) string { return c.Discord.PublicKey }, "file"},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			cfg, err := LoadConfig(p, noEnv)
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.got(cfg); got != tt.file {
				t.Errorf("without %s: %q, want the file's %q", tt.env, got, tt.file)
			}
			const v = "http://from-env.example/0123456789"
			cfg, err = LoadConfig(p, func(k string) string {
				if k == tt.env {
					return v
				}
				return ""
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.got(cfg); got != v {
				t.Errorf("%s: %q, want the environment's value", tt.env, got)
			}
		})
	}
}

// TestDecodeErrorHidesGoTypes checks the second pass on its own: should a wrong type ever get
// past the first pass, go-toml's message, which names Go types, is replaced by what the key
// wants.
func TestDecodeErrorHidesGoTypes(t *testing.T) {
	tests := []struct{ body, want string }{
		{"[agent]\nmax_steps = \"ten\"\n", "x.toml:2:13: agent.max_steps: want a whole number"},
		{"[slack]\nallowed_channels = [1]\n", "x.toml:2:21: slack.allowed_channels: want a list of text"},
		{"[agent.max_steps]\n", "agent.max_steps: want a whole number"},
		{"[agent.risk]\ns.x = \"safe\"\n", "agent.risk.s: want a risk level"},
	}
	for _, tt := range tests {
		var cfg Config
		raw := toml.NewDecoder(strings.NewReader(tt.body)).DisallowUnknownFields().Decode(&cfg)
		if raw == nil || showsGoType(raw) == "" {
			t.Fatalf("%q: go-toml's own error %v shows no Go type; the test proves nothing", tt.body, raw)
		}
		err := decodeError("x.toml", raw, reflect.TypeFor[Config]())
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.body, err, tt.want)
		}
		if m := showsGoType(err); m != "" {
			t.Errorf("%q: %v shows the Go type name %q", tt.body, err, m)
		}
	}
}

// TestExampleShowsTheDefaults checks that the values config.example.toml shows are the
// defaults, for the sections whose defaults are values of their Config (the tools and the
// chat adapters fill theirs in where they are used).
func TestExampleShowsTheDefaults(t *testing.T) {
	cfg, err := LoadConfig("../../config.example.toml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	def := DefaultConfig()
	for _, s := range []struct {
		section         string
		example, defval any
	}{
		{"store", cfg.Store, def.Store},
		{"log", cfg.Log, def.Log},
		{"admin", cfg.Admin, def.Admin},
		{"llm", cfg.LLM, def.LLM},
		{"web", cfg.Web, def.Web},
		{"agent", cfg.Agent.Defaults(), def.Agent.Defaults()},
		{"bot", cfg.Bot.Defaults(), def.Bot.Defaults()},
	} {
		ex, dv := emptyToNil(reflect.ValueOf(&s.example).Elem()), emptyToNil(reflect.ValueOf(&s.defval).Elem())
		if !reflect.DeepEqual(ex, dv) {
			t.Errorf("[%s] in config.example.toml is\n%+v\nbut the default is\n%+v", s.section, ex, dv)
		}
	}
}

// emptyToNil returns a copy of v with empty slices and maps made nil, so that `key = []` in
// the file equals a key left out.
func emptyToNil(v reflect.Value) any {
	out := reflect.New(v.Type()).Elem()
	out.Set(v)
	if out.Kind() == reflect.Interface {
		inner := reflect.New(out.Elem().Type()).Elem()
		inner.Set(out.Elem())
		return emptyToNil(inner)
	}
	var walk func(reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Field(i).CanSet() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice, reflect.Map:
			if v.Len() == 0 && !v.IsNil() {
				v.Set(reflect.Zero(v.Type()))
			}
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		}
	}
	walk(out)
	return out.Interface()
}
