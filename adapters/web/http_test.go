package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// recorder is a Handler that records the events it gets and answers with a notice.
type recorder struct {
	mu     sync.Mutex
	events []bot.Event
	notice string
	err    error
}

func (r *recorder) Handle(ctx context.Context, ev bot.Event) (bot.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := ev.Validate(); err != nil {
		return bot.Result{}, fmt.Errorf("the adapter made an invalid event: %w", err)
	}
	r.events = append(r.events, ev)
	return bot.Result{Notice: r.notice}, r.err
}

func (r *recorder) got() []bot.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bot.Event(nil), r.events...)
}

const testToken = "0123456789abcdef-secret"

func newServer(t *testing.T, cfg Config, opts ...Option) (*Adapter, *httptest.Server, *recorder) {
	t.Helper()
	a, err := New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	srv := httptest.NewServer(a.HTTPHandler(rec))
	t.Cleanup(srv.Close)
	return a, srv, rec
}

// post sends a JSON POST as the page does, with extra headers applied last ("" deletes).
func post(t *testing.T, srv *httptest.Server, path, body string, hdr ...string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Loopbot", "1")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	return do(t, srv, req)
}

func get(t *testing.T, srv *httptest.Server, path string, hdr ...string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return do(t, srv, req)
}

// do sends req without following redirects and decodes a JSON answer.
func do(t *testing.T, srv *httptest.Server, req *http.Request) (*http.Response, map[string]any) {
	t.Helper()
	c := *srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		json.Unmarshal(body, &v)
	} else {
		v = map[string]any{"body": string(body)}
	}
	return res, v
}

func goal(id, user, text string) string {
	b, _ := json.Marshal(request{ID: id, User: user, Text: text})
	return string(b)
}

func TestPagesAndHeaders(t *testing.T) {
	_, srv, _ := newServer(t, Config{Banner: `DEMO MODE: <b>scripted</b>`})
	for _, tt := range []struct{ path, ctype, contains string }{
		{"/", "text/html; charset=utf-8", "DEMO MODE: &lt;b&gt;scripted&lt;/b&gt;"},
		{"/app.js", "text/javascript; charset=utf-8", "new EventSource"},
		{"/app.css", "text/css; charset=utf-8", ".msg-status"},
		{"/api/threads", "application/json", "[]"},
	} {
		res, v := get(t, srv, tt.path)
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != tt.ctype {
			t.Errorf("GET %s: %s, %s", tt.path, res.Status, res.Header.Get("Content-Type"))
		}
		if b, ok := v["body"].(string); ok && !strings.Contains(b, tt.contains) {
			t.Errorf("GET %s does not contain %q", tt.path, tt.contains)
		}
		csp := res.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %q", tt.path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") {
			t.Errorf("CSP allows inline script or style: %q", csp)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", tt.path)
		}
	}
	if p := indexHTML; strings.Contains(p, "<script>") || strings.Contains(p, " style=") || strings.Contains(p, " onclick=") {
		t.Error("index.html has inline script or style")
	}
	for _, path := range []string{"/index.html", "/static/app.js", "/healthz"} {
		if res, _ := get(t, srv, path); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", path, res.Status)
		}
	}
}

func TestLoopbackHostNamesOnly(t *testing.T) {
	_, srv, _ := newServer(t, Config{})
	for host, want := range map[string]int{
		"":                  http.StatusOK,
		"localhost:8080":    http.StatusOK,
		"[::1]:8080":        http.StatusOK,
		"evil.example:8080": http.StatusForbidden,
		"127.0.0.1.nip.io":  http.StatusForbidden,
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/threads", nil)
		if host != "" {
			req.Host = host
		}
		if res, _ := do(t, srv, req); res.StatusCode != want {
			t.Errorf("Host %q: %s, want %d", host, res.Status, want)
		}
	}
}

// noRules is a bot policy with no approver rule that needs to tell people apart, as an
// exposed console with one shared token needs.
var noRules = WithPolicy(bot.Policy{DangerousNeedsOther: new(bool)})

func TestToken(t *testing.T) {
	_, srv, rec := newServer(t, Config{Addr: ":8080", Token: testToken}, noRules)
	cookie := cookieName + "=" + testToken
	tests := []struct {
		name   string
		method string
		path   string
		hdr    []string
		want   int
	}{
		{"page without token", "GET", "/", nil, http.StatusUnauthorized},
		{"script without token", "GET", "/app.js", nil, http.StatusUnauthorized},
		{"events without token", "GET", "/api/events", nil, http.StatusUnauthorized},
		{"wrong login", "GET", "/?token=nope", nil, http.StatusUnauthorized},
		{"login", "GET", "/?token=" + testToken, nil, http.StatusSeeOther},
		{"cookie", "GET", "/", []string{"Cookie", cookie}, http.StatusOK},
		{"wrong cookie", "GET", "/", []string{"Cookie", cookieName + "=" + testToken + "x"}, http.StatusUnauthorized},
		{"bearer", "GET", "/api/threads", []string{"Authorization", "Bearer " + testToken}, http.StatusOK},
		{"wrong bearer", "GET", "/api/threads", []string{"Authorization", "Bearer " + testToken[:16]}, http.StatusUnauthorized},
		{"token in query elsewhere", "GET", "/api/threads?token=" + testToken, nil, http.StatusUnauthorized},
		{"post without token", "POST", "/api/threads", nil, http.StatusUnauthorized},
		{"post with token", "POST", "/api/threads", []string{"Authorization", "Bearer " + testToken}, http.StatusCreated},
		// With a token the Host is not checked: the console is meant to be reached by name.
		{"any host", "GET", "/api/threads", []string{"Authorization", "Bearer " + testToken, "Host", "console.lan"}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var res *http.Response
			if tt.method == "POST" {
				res, _ = post(t, srv, tt.path, goal(uuid1, "ann", "hi"), tt.hdr...)
			} else {
				req, _ := http.NewRequest(http.MethodGet, srv.URL+tt.path, nil)
				for i := 0; i+1 < len(tt.hdr); i += 2 {
					if tt.hdr[i] == "Host" {
						req.Host = tt.hdr[i+1]
					} else {
						req.Header.Set(tt.hdr[i], tt.hdr[i+1])
					}
				}
				res, _ = do(t, srv, req)
			}
			if res.StatusCode != tt.want {
				t.Fatalf("%s %s: %s, want %d", tt.method, tt.path, res.Status, tt.want)
			}
			if tt.name == "login" {
				c := res.Cookies()
				if len(c) != 1 || c[0].Value != testToken || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode {
					t.Errorf("login cookie %+v", c)
				}
				if res.Header.Get("Location") != "/" {
					t.Errorf("login redirects to %q, want /", res.Header.Get("Location"))
				}
			}
		})
	}
	if n := len(rec.got()); n != 1 {
		t.Errorf("the bot got %d events, want the one with the token", n)
	}
}

func TestPostChecks(t *testing.T) {
	a, srv, rec := newServer(t, Config{})
	res, v := post(t, srv, "/api/threads", goal(uuid1, "ann", "start"))
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("new thread: %s %v", res.Status, v)
	}
	thread := v["thread"].(string)
	big := goal("0b5d6c1e-4a8e-4f0a-9a55-3d7f2c1e9b11", "ann", strings.Repeat("x", maxBody))
	tests := []struct {
		name, path, body string
		hdr              []string
		want             int
		msg              string
	}{
		{"no custom header", "/api/threads", goal(uuid1, "ann", "x"), []string{"X-Loopbot", ""}, http.StatusForbidden, "X-Loopbot: 1"},
		{"wrong custom header", "/api/threads", goal(uuid1, "ann", "x"), []string{"X-Loopbot", "yes"}, http.StatusForbidden, "X-Loopbot: 1"},
		{"form post", "/api/threads", "text=x", []string{"Content-Type", "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType, "application/json"},
		{"plain text", "/api/actions", "{}", []string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType, "application/json"},
		{"cross site", "/api/threads", goal(uuid1, "ann", "x"), []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden, "cross-origin"},
		{"foreign origin", "/api/threads", goal(uuid1, "ann", "x"), []string{"Origin", "https://evil.example"}, http.StatusForbidden, "cross-origin"},
		{"bad json", "/api/threads", `{"id":`, nil, http.StatusBadRequest, "not the expected JSON object"},
		{"bad json reply", "/api/threads/" + thread + "/messages", `nope`, nil, http.StatusBadRequest, "not the expected JSON object"},
		{"bad json action", "/api/actions", `{"id":1}`, nil, http.StatusBadRequest, "not the expected JSON object"},
		{"missing text", "/api/threads", `{"id":"` + uuid1 + `","user":"ann"}`, nil, http.StatusBadRequest, "text: required"},
		{"oversized", "/api/threads", big, nil, http.StatusRequestEntityTooLarge, "body over"},
		{"reply to unknown thread", "/api/threads/nope/messages", goal(uuid1, "ann", "x"), nil, http.StatusNotFound, "no thread nope"},
		{"action in unknown thread", "/api/actions", `{"id":"` + uuid1 + `","user":"ann","action":"a1","thread":"nope"}`, nil, http.StatusNotFound, "no thread nope"},
		{"same origin", "/api/threads/" + thread + "/messages", goal("0b5d6c1e-4a8e-4f0a-9a55-3d7f2c1e9b12", "ann", "x"), []string{"Sec-Fetch-Site", "same-origin", "Origin", srv.URL}, http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, v := post(t, srv, tt.path, tt.body, tt.hdr...)
			if res.StatusCode != tt.want {
				t.Fatalf("%s: %s %v, want %d", tt.path, res.Status, v, tt.want)
			}
			if msg, _ := v["error"].(string); !strings.Contains(msg, tt.msg) {
				t.Errorf("error %q, want one containing %q", msg, tt.msg)
			}
		})
	}
	for _, path := range []string{"/api/threads/nope", "/api/events?thread=nope"} {
		if res, _ := get(t, srv, path); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", path, res.Status)
		}
	}
	if res, _ := get(t, srv, "/api/events?thread=%3Cx%3E"); res.StatusCode != http.StatusBadRequest {
		t.Errorf("GET events of a bad thread id: %s, want 400", res.Status)
	}
	if n := len(rec.got()); n != 2 {
		t.Errorf("the bot got %d events, want 2 (the goal and the same-origin reply)", n)
	}
	if a.subscribers() != 0 {
		t.Errorf("%d subscribers left", a.subscribers())
	}
}

func (a *Adapter) threadCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.threads)
}

func TestSubmissions(t *testing.T) {
	a, srv, rec := newServer(t, Config{})
	rec.notice = "only for you"
	res, v := post(t, srv, "/api/threads", goal(uuid1, "ann", "summarise <the> issues\nplease"))
	if res.StatusCode != http.StatusCreated || v["notice"] != "only for you" {
		t.Fatalf("new thread: %s %v", res.Status, v)
	}
	id := v["thread"].(string)
	// A double submit is the same delivery: same thread, one message, and the bot sees the
	// same event ID to dedupe.
	if _, v := post(t, srv, "/api/threads", goal(uuid1, "ann", "summarise <the> issues\nplease")); v["thread"] != id {
		t.Fatalf("resubmitted goal went to thread %v, want %s", v["thread"], id)
	}
	reply := goal("1b5d6c1e-4a8e-4f0a-9a55-3d7f2c1e9b10", "bob", "yes, go on")
	for range 2 {
		if res, v := post(t, srv, "/api/threads/"+id+"/messages", reply); res.StatusCode != http.StatusOK || v["thread"] != id {
			t.Fatalf("reply: %s %v", res.Status, v)
		}
	}
	action := `{"id":"2b5d6c1e-4a8e-4f0a-9a55-3d7f2c1e9b10","user":"bob","action":"approve-1","thread":"` + id + `"}`
	if res, v := post(t, srv, "/api/actions", action); res.StatusCode != http.StatusOK || v["notice"] != "only for you" {
		t.Fatalf("action: %s %v", res.Status, v)
	}

	// On a single-person console everyone is "you", whatever name the body gives.
	you := bot.User{ID: "web:you", Name: "you"}
	ref := threadRef(id)
	evs := rec.got()
	want := []bot.Event{
		{Kind: bot.EventMention, ID: "web:" + uuid1, Thread: ref, User: you, Text: "summarise <the> issues\nplease"},
		{Kind: bot.EventMention, ID: "web:" + uuid1, Thread: ref, User: you, Text: "summarise <the> issues\nplease"},
		{Kind: bot.EventReply, ID: "web:1b5d6c1e-4a8e-4f0a-9a55-3d7f2c1e9b10", Thread: ref, User: you, Text: "yes, go on", Direct: true},
		{Kind: bot.EventReply, ID: "web:1b5d6c1e-4a8e-4f0a-9a55-3d7f2c1e9b10", Thread: ref, User: you, Text: "yes, go on", Direct: true},
		{Kind: bot.EventAction, ID: "web:2b5d6c1e-4a8e-4f0a-9a55-3d7f2c1e9b10", Thread: ref, User: you, ActionID: "approve-1"},
	}
	if len(evs) != len(want) {
		t.Fatalf("got %d events, want %d: %+v", len(evs), len(want), evs)
	}
	for i := range want {
		if evs[i].At.IsZero() {
			t.Errorf("event %d has no time", i)
		}
		evs[i].At = want[i].At
		if evs[i] != want[i] {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, evs[i], want[i])
		}
	}

	_, th := get(t, srv, "/api/threads/"+id)
	if th["title"] != "summarise <the> issues" {
		t.Errorf("title %q", th["title"])
	}
	msgs := th["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("thread holds %d messages, want the goal and the reply once each", len(msgs))
	}
	if h := msgs[0].(map[string]any)["html"].(string); !strings.Contains(h, "summarise &lt;the&gt; issues") || !strings.Contains(h, ">you<") {
		t.Errorf("goal message %s", h)
	}
	if a.threadCount() != 1 {
		t.Errorf("%d threads, want 1", a.threadCount())
	}
}

func TestHandlerErrors(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
	}{
		{errors.New("disk full"), http.StatusInternalServerError},
		{fmt.Errorf("handle: %w", bot.ErrStopped), http.StatusServiceUnavailable},
	} {
		_, srv, rec := newServer(t, Config{})
		rec.err = tt.err
		res, v := post(t, srv, "/api/threads", goal(uuid1, "ann", "x"))
		if res.StatusCode != tt.want {
			t.Errorf("Handle error %v: %s, want %d", tt.err, res.Status, tt.want)
		}
		if msg, _ := v["error"].(string); msg == "" || strings.Contains(msg, "disk full") {
			t.Errorf("error shown to the browser: %q", msg)
		}
	}
}
