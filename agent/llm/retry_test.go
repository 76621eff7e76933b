package llm

import (
	"net/http"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		headers map[string]string
		want    time.Duration
		wantOK  bool
	}{
		{"none", nil, 0, false},
		{"seconds", map[string]string{"Retry-After": "20"}, 20 * time.Second, true},
		{"seconds with spaces", map[string]string{"Retry-After": " 3 "}, 3 * time.Second, true},
		{"zero", map[string]string{"Retry-After": "0"}, 0, true},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond, true},
		{"HTTP date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second, true},
		{"RFC 850 date", map[string]string{"Retry-After": now.Add(time.Minute).Format(time.RFC850)}, time.Minute, true},
		{"date in the past", map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0, true},
		{"milliseconds win", map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond, true},
		{"bad milliseconds fall back", map[string]string{"Retry-After-Ms": "soon", "Retry-After": "9"}, 9 * time.Second, true},
		{"negative", map[string]string{"Retry-After": "-5"}, 0, false},
		{"garbage", map[string]string{"Retry-After": "tomorrow"}, 0, false},
		{"NaN", map[string]string{"Retry-After": "NaN"}, 0, false},
		{"huge is capped", map[string]string{"Retry-After": "1e300"}, maxRetryAfterHeader, true},
		{"infinite is capped", map[string]string{"Retry-After": "+Inf"}, maxRetryAfterHeader, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.headers {
				h.Set(k, v)
			}
			got, ok := parseRetryAfter(h, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("parseRetryAfter(%v) = %s, %t; want %s, %t", tt.headers, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// FuzzParseRetryAfter checks that any header value gives a wait within bounds, and nothing
// when it says nothing usable.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "1.25", "Wed, 21 Oct 2015 07:28:00 GMT", "-1", "1e400", "0x10", "", "NaN"} {
		f.Add(s, "")
		f.Add("", s)
	}
	now := time.Date(2015, 10, 21, 7, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, retryAfter, retryAfterMs string) {
		h := http.Header{}
		h.Set("Retry-After", retryAfter)
		h.Set("Retry-After-Ms", retryAfterMs)
		d, ok := parseRetryAfter(h, now)
		if d < 0 || d > maxRetryAfterHeader {
			t.Errorf("wait %s out of [0, %s]", d, maxRetryAfterHeader)
		}
		if !ok && d != 0 {
			t.Errorf("wait %s reported as absent", d)
		}
	})
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		attempt int
		want    time.Duration
	}{
		{1, 500 * time.Millisecond},
		{2, time.Second},
		{3, 2 * time.Second},
		{7, maxBackoff},
		{1000, maxBackoff},
		{0, baseBackoff},
	}
	for _, tt := range tests {
		if got := backoff(tt.attempt); got != tt.want {
			t.Errorf("backoff(%d) = %s, want %s", tt.attempt, got, tt.want)
		}
	}
	for range 1000 {
		d := 3 * time.Second
		if j := halfJitter(d); j < d/2 || j > d {
			t.Fatalf("halfJitter(%s) = %s, want within [%s, %s]", d, j, d/2, d)
		}
	}
}

func TestPriceCost(t *testing.T) {
	p := Price{PromptPerMillion: 3, CompletionPerMillion: 15, CachedPerMillion: 0.3}
	tests := []struct {
		name  string
		price Price
		usage agent.Usage
		want  float64
	}{
		{"plain", p, agent.Usage{PromptTokens: 2_000_000, CompletionTokens: 100_000}, 6 + 1.5},
		{"cached", p, agent.Usage{PromptTokens: 2_000_000, CachedTokens: 1_000_000}, 3 + 0.3},
		{"cached beyond prompt is clamped", p, agent.Usage{PromptTokens: 1_000_000, CachedTokens: 5_000_000}, 0.3},
		{"cached unpriced", Price{PromptPerMillion: 3}, agent.Usage{PromptTokens: 1_000_000, CachedTokens: 500_000}, 3},
		{"free", Price{}, agent.Usage{PromptTokens: 1_000_000, CompletionTokens: 1_000_000}, 0},
	}
	for _, tt := range tests {
		if got := tt.price.Cost(tt.usage); got < tt.want-1e-9 || got > tt.want+1e-9 {
			t.Errorf("%s: Cost = %v, want %v", tt.name, got, tt.want)
		}
	}
}
