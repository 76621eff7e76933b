package llmtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// shapeOf reads body as Lean does.
func shapeOf(body string) (sh Shape, model string, stream bool, err error) {
	dec := jsontext.NewDecoder(strings.NewReader(body))
	return readShape(dec)
}

// FuzzReadShape checks readShape against Server's decoding: when both take a body, they
// agree on the messages, the tool results, the tools, the model and the stream flag.
func FuzzReadShape(f *testing.F) {
	f.Add(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	f.Add(`{"model":"m","stream":true,"messages":[{"role":"tool","content":[{"type":"text","text":"x"}]}],"tools":[{"type":"function","function":{"name":"a"}}]}`)
	f.Add(`{"model":"\u006d","messages":[{"role":"t\u006fol","tool_call_id":"c","content":null},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"a","arguments":"{}"}}]}],"tools":[]}`)
	f.Add(` { "model" : "m" , "messages" : [ ] , "extra" : {"messages":[{"role":"tool"}]} } `)
	f.Fuzz(func(t *testing.T, body string) {
		sh, model, stream, err := shapeOf(body)
		if err != nil {
			return
		}
		lower := strings.ToLower(body)
		for _, name := range []string{`"model"`, `"messages"`, `"role"`, `"tools"`, `"stream"`} {
			if strings.Count(lower, name) != strings.Count(body, name) {
				return // encoding/json matches names in any case, an OpenAI server does not
			}
		}
		req, err := decodeRequest([]byte(body))
		if err != nil {
			return // Server is stricter about the types of the fields it keeps
		}
		var quoted string
		if err := json.Unmarshal([]byte(model), &quoted); err != nil || quoted != req.Model {
			t.Errorf("model %s, Server read %q", model, req.Model)
		}
		tools := 0
		for _, m := range req.Messages {
			if m.Role == "tool" {
				tools++
			}
		}
		if sh.Messages != len(req.Messages) || sh.ToolResults != tools || sh.Tools != len(req.Tools) || stream != req.Stream {
			t.Errorf("shape %+v stream %v, Server read %d messages, %d tool results, %d tools, stream %v", sh, stream, len(req.Messages), tools, len(req.Tools), req.Stream)
		}
	})
}

// benchBody is a request of a run four steps in, as the makespan scenario's client sends it.
func benchBody() string {
	var b strings.Builder
	b.WriteString(`{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat("You are a careful assistant. ", 40) + `"},{"role":"user","content":"look around"}`)
	for i := range 4 {
		n := strconv.Itoa(i)
		b.WriteString(`,{"role":"assistant","tool_calls":[{"id":"call_` + n + `","type":"function","function":{"name":"look","arguments":"{\"n\":` + n + `}"}}]}`)
		b.WriteString(`,{"role":"tool","content":"a short result","tool_call_id":"call_` + n + `"}`)
	}
	b.WriteString(`],"stream":false,"tools":[{"type":"function","function":{"name":"look","description":"Returns a fixed text for any n.","parameters":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}}]}`)
	return b.String()
}

// BenchmarkFakeModel is the fake model's cost of one request, handler only: Server records
// and decodes it, Lean reads its shape.
func BenchmarkFakeModel(b *testing.B) {
	body := benchBody()
	answer := func(toolResults int) Answer {
		if toolResults < 4 {
			return Answer{Tool: "look", Arguments: `{"n":1}`}
		}
		return Answer{Text: "done"}
	}
	full := New()
	full.SetFallback(Func(func(r Request) Step {
		n := 0
		for _, m := range r.Messages {
			if m.Role == "tool" {
				n++
			}
		}
		a := answer(n)
		if a.Tool != "" {
			return ToolCalls(Call(a.Tool, a.Arguments))
		}
		return Text(a.Text)
	}))
	lean := NewLean(0, func(sh Shape) Answer { return answer(sh.ToolResults) })
	for _, h := range []struct {
		name string
		h    http.Handler
	}{{"server", full}, {"lean", lean}} {
		b.Run(h.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				w := httptest.NewRecorder()
				h.h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
