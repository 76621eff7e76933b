package llm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/loopbot/loopbot/agent/llm"
)

// TestConfigTOML decodes a config file section strictly, so a field whose tag drifts from
// config.example.toml fails here.
func TestConfigTOML(t *testing.T) {
	const doc = `
base_url = "http://localhost:11434/v1"
api_key = "k"
model = "llama3.1"
azure = false
api_version = ""
max_retries = 2
stream = true
temperature = 0.2
timeout = "90s"

[price]
prompt_per_million = 0.15
completion_per_million = 0.6
cached_per_million = 0.075
`
	var cfg llm.Config
	dec := toml.NewDecoder(strings.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if cfg.BaseURL != "http://localhost:11434/v1" || cfg.Model != "llama3.1" || cfg.MaxRetries != 2 || !cfg.Stream {
		t.Errorf("decoded %v", cfg)
	}
	if cfg.Temperature == nil || *cfg.Temperature != 0.2 {
		t.Errorf("temperature = %v, want 0.2", cfg.Temperature)
	}
	if time.Duration(cfg.Timeout) != 90*time.Second {
		t.Errorf("timeout = %s, want 90s", time.Duration(cfg.Timeout))
	}
	if cfg.Price != (llm.Price{PromptPerMillion: 0.15, CompletionPerMillion: 0.6, CachedPerMillion: 0.075}) {
		t.Errorf("price = %+v", cfg.Price)
	}

	var bad llm.Config
	if err := toml.Unmarshal([]byte(`timeout = "soon"`), &bad); err == nil || !strings.Contains(err.Error(), "duration") {
		t.Errorf("decoding timeout = \"soon\": err = %v, want a duration error", err)
	}
}

// TestDefaultConfig checks that the defaults loopbot starts from are usable as they are.
func TestDefaultConfig(t *testing.T) {
	c := llm.DefaultConfig()
	if err := c.Check(); err != nil {
		t.Fatalf("DefaultConfig does not pass Check: %v", err)
	}
	if c.Model != "gpt-4o-mini" || c.MaxRetries != llm.DefaultMaxRetries || time.Duration(c.Timeout) != 2*time.Minute {
		t.Errorf("DefaultConfig = %v", c)
	}
}
