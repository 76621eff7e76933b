package main

import (
	"math"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent/llm/llmtest"
)

// TestPrefixAndCachedCost checks the cache model on requests of known sizes: a request that
// repeats the one before and adds as much again shares half of itself, and that half is
// billed at the cached price only when it reaches the provider's minimum.
func TestPrefixAndCachedCost(t *testing.T) {
	msg := func(role string, chars int) llmtest.Message {
		return llmtest.Message{Role: role, Content: strings.Repeat("x", chars)}
	}
	tests := []struct {
		name       string
		chars      int // of each message; a request's tokens are about chars/4 a message
		wantPrefix float64
		wantCost   float64
	}{
		// 8000 tokens, then 16000 of which the first 8000 are cached: (8000 + 8000 +
		// 8000/2) / 24000.
		{name: "over the minimum", chars: 32000, wantPrefix: 0.5, wantCost: 20.0 / 24},
		// 250 tokens are under the 1024 a provider caches from: no discount.
		{name: "under the minimum", chars: 1000, wantPrefix: 0.5, wantCost: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := llmtest.Request{Messages: []llmtest.Message{msg("system", tt.chars)}}
			second := llmtest.Request{Messages: append(append([]llmtest.Message(nil), first.Messages...), msg("user", tt.chars))}
			reqs := []llmtest.Request{first, second}
			if got := prefixShare(reqs); math.Abs(got-tt.wantPrefix) > 0.01 {
				t.Errorf("prefixShare = %.4f, want %.2f", got, tt.wantPrefix)
			}
			if got := cachedCost(reqs) / uncachedCost(reqs); math.Abs(got-tt.wantCost) > 0.01 {
				t.Errorf("cached cost ratio = %.4f, want %.4f", got, tt.wantCost)
			}
		})
	}
	// A request that repeats nothing of the one before shares nothing.
	other := []llmtest.Request{{Messages: []llmtest.Message{msg("system", 8000)}}, {Messages: []llmtest.Message{msg("user", 8000)}}}
	if got := prefixShare(other); got > 0.01 {
		t.Errorf("prefixShare of unrelated requests = %.4f, want 0", got)
	}
}

// TestScenarioOutputs checks the prompt scenario's outputs: their sizes average -output-kb,
// each has a first and last line of its own, and checkSeen refuses a request that showed an
// output's start only, as a cut that keeps the head would.
func TestScenarioOutputs(t *testing.T) {
	const meanKB = 8
	total := 0
	seen := map[string]bool{}
	for n := 1; n <= len(outputSizes); n++ {
		out, first, last := scenarioOutput(n, meanKB)
		total += len(out)
		if !strings.HasPrefix(out, first+"\n") || !strings.HasSuffix(out, "\n"+last) {
			t.Errorf("output %d does not start with %q and end with %q", n, first, last)
		}
		if seen[first] || seen[last] {
			t.Errorf("output %d shares its first or last line with another", n)
		}
		seen[first], seen[last] = true, true
	}
	if mean := total / len(outputSizes); mean < meanKB*1024*95/100 || mean > meanKB*1024 {
		t.Errorf("mean output size %d bytes, want about %d", mean, meanKB*1024)
	}

	request := func(result string) llmtest.Request {
		return llmtest.Request{Messages: []llmtest.Message{{Role: "system", Content: "s"}, {Role: "tool", Content: result}}}
	}
	out, first, last := scenarioOutput(1, meanKB)
	whole := []llmtest.Request{request(""), request(out)}
	if err := checkSeen(whole, 1, meanKB); err != nil {
		t.Errorf("the whole output: %v", err)
	}
	headTail := []llmtest.Request{request(""), request(first + "\n[... cut ...]\n" + last)}
	if err := checkSeen(headTail, 1, meanKB); err != nil {
		t.Errorf("head and tail: %v", err)
	}
	headOnly := []llmtest.Request{request(""), request(out[:len(out)/2])}
	if err := checkSeen(headOnly, 1, meanKB); err == nil {
		t.Error("checkSeen accepted a request that showed the output's start only")
	}
}
