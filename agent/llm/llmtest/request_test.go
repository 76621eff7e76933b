package llmtest

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want []string
	}{
		{"", 3, nil},
		{"abc", 3, []string{"abc"}},
		{"abcdefg", 3, []string{"abc", "def", "g"}},
		{"héllo wörld", 4, []string{"héll", "o wö", "rld"}},
	}
	for _, tt := range tests {
		got := split(tt.s, tt.n)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("split(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

// FuzzDecodeRequest checks that any request body decodes or fails cleanly, and that a decoded
// request keeps every message and every string content as sent.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"x","arguments":"{}"}}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"}]}],"tools":[{"type":"function","function":{"name":"t","parameters":{}}}],"stream":true,"stream_options":{"include_usage":true}}`))
	f.Add([]byte(`{"messages":[{"content":7}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeRequest(body)
		if err != nil {
			return
		}
		var generic struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &generic); err != nil {
			t.Fatalf("decodeRequest accepted a body plain JSON refuses: %v", err)
		}
		if len(r.Messages) != len(generic.Messages) {
			t.Fatalf("%d messages decoded, %d sent", len(r.Messages), len(generic.Messages))
		}
		for i, m := range generic.Messages {
			var s string
			if json.Unmarshal(m.Content, &s) == nil && r.Messages[i].Content != s {
				t.Errorf("message %d content = %q, want %q", i, r.Messages[i].Content, s)
			}
		}
		if r.Chars() < 0 || (utf8.Valid(body) && r.Chars() > utf8.RuneCount(body)) {
			t.Errorf("Chars = %d for a body of %d characters", r.Chars(), utf8.RuneCount(body))
		}
	})
}
