package llm

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// DefaultMaxRetries is the number of retries when Config.MaxRetries is zero.
const DefaultMaxRetries = 4

// DefaultConfig is the configuration with nothing set in the file: OpenAI's gpt-4o-mini,
// DefaultMaxRetries retries, and two minutes for each attempt.
func DefaultConfig() Config {
	return Config{Model: "gpt-4o-mini", MaxRetries: DefaultMaxRetries, Timeout: agent.Duration(2 * time.Minute)}
}

// Config says which model to use, how to reach it and what it costs. Its toml tags let it
// sit in loopbot's configuration file as it is.
type Config struct {
	// BaseURL is the endpoint, up to and excluding /chat/completions: for example
	// "http://localhost:11434/v1" for Ollama. Empty means OpenAI. With Azure it is the
	// resource URL, such as "https://example.openai.azure.com".
	BaseURL string `toml:"base_url"`
	// APIKey is sent as a bearer token (as the api-key header for Azure). Local servers need
	// none.
	APIKey string `toml:"api_key"`
	// Model is the model's name; with Azure, the deployment's name.
	Model string `toml:"model"`
	// Azure selects Azure OpenAI's URLs and authentication.
	Azure bool `toml:"azure"`
	// APIVersion is Azure's api-version; empty takes go-openai's default.
	APIVersion string `toml:"api_version"`
	// MaxRetries bounds the retries of one Complete call. Zero means DefaultMaxRetries; a
	// negative value disables retries.
	MaxRetries int `toml:"max_retries"`
	// Stream asks for the reply as a stream, accumulated before Complete returns. It makes no
	// difference to the Reply; some endpoints and proxies cope better with one or the other.
	Stream bool `toml:"stream"`
	// Temperature is sent when set; nil leaves it to the endpoint.
	Temperature *float32 `toml:"temperature"`
	// Timeout bounds each attempt, so that one hung connection does not use up the whole
	// call; the caller's context still bounds the call, retries included. Zero means no bound
	// beyond the context.
	Timeout agent.Duration `toml:"timeout"`
	// Price is what the model costs; a zero Price counts no cost.
	Price Price `toml:"price"`
}

// String describes the configuration without its API key, so that logging a Config never
// leaks the key.
func (c Config) String() string {
	key := "none"
	if c.APIKey != "" {
		key = "set"
	}
	return fmt.Sprintf("llm.Config{BaseURL:%q Model:%q Azure:%t APIKey:%s Stream:%t MaxRetries:%d Timeout:%s}",
		c.BaseURL, c.Model, c.Azure, key, c.Stream, c.MaxRetries, time.Duration(c.Timeout))
}

// Check reports what makes the configuration unusable.
func (c Config) Check() error {
	var errs []error
	if c.Model == "" {
		errs = append(errs, errors.New("model is empty"))
	}
	if c.Azure && c.BaseURL == "" {
		errs = append(errs, errors.New("azure needs base_url, the resource URL"))
	}
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("base_url: %w", err))
		case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
			errs = append(errs, fmt.Errorf("base_url %q is not an http or https URL", c.BaseURL))
		}
	}
	if c.Timeout < 0 {
		errs = append(errs, errors.New("timeout is negative"))
	}
	if c.Price.PromptPerMillion < 0 || c.Price.CompletionPerMillion < 0 || c.Price.CachedPerMillion < 0 {
		errs = append(errs, errors.New("a price is negative"))
	}
	return errors.Join(errs...)
}

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	PromptPerMillion     float64 `toml:"prompt_per_million"`
	CompletionPerMillion float64 `toml:"completion_per_million"`
	// CachedPerMillion is the price of prompt tokens served from the endpoint's cache. Zero
	// charges them as ordinary prompt tokens: a cost budget should rather overestimate than
	// let a run overspend because a price was left out.
	CachedPerMillion float64 `toml:"cached_per_million"`
}

// Cost is what u costs in US dollars. Cached tokens are part of the prompt tokens, as
// OpenAI counts them.
func (p Price) Cost(u agent.Usage) float64 {
	cached := min(max(u.CachedTokens, 0), max(u.PromptTokens, 0))
	cachedPrice := p.CachedPerMillion
	if cachedPrice == 0 {
		cachedPrice = p.PromptPerMillion
	}
	return (float64(u.PromptTokens-cached)*p.PromptPerMillion +
		float64(cached)*cachedPrice +
		float64(u.CompletionTokens)*p.CompletionPerMillion) / 1e6
}
