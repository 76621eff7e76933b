package discordfake

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func newServer(t *testing.T) *Server {
	t.Helper()
	f, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func do(t *testing.T, method, url, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// A rate limit fault skips, answers its 429s with Discord's body and headers, and then
// lets the route work again; the log says what each request was answered.
func TestRateLimitFault(t *testing.T) {
	f := newServer(t)
	route := "/api/v9/channels/" + Channel + "/messages"
	fl := RateLimitFault("POST", "/api/v9/channels/*/messages", 2, 1500*time.Millisecond)
	fl.Skip = 1
	f.Inject(fl)
	var statuses []int
	for range 4 {
		resp, body := do(t, "POST", f.URL()+strings.TrimPrefix(route, "/"), `{"content":"hi"}`)
		statuses = append(statuses, resp.StatusCode)
		if resp.StatusCode != 429 {
			continue
		}
		var b struct {
			RetryAfter float64 `json:"retry_after"`
			Global     bool    `json:"global"`
		}
		if err := json.Unmarshal([]byte(body), &b); err != nil || b.RetryAfter != 1.5 || b.Global {
			t.Errorf("429 body %s (%v)", body, err)
		}
		if resp.Header.Get("Retry-After") != "2" || resp.Header.Get("X-RateLimit-Reset-After") != "1.500" || resp.Header.Get("X-RateLimit-Remaining") != "0" {
			t.Errorf("429 headers %v", resp.Header)
		}
	}
	if want := []int{200, 429, 429, 200}; !equal(statuses, want) {
		t.Errorf("statuses %v, want %v", statuses, want)
	}
	var logged []int
	for _, r := range Find(f.Requests(), "POST", route) {
		logged = append(logged, r.Status)
	}
	if !equal(logged, statuses) {
		t.Errorf("logged statuses %v, want %v", logged, statuses)
	}
	if n := len(f.ChannelMessages(Channel)); n != 2 {
		t.Errorf("%d messages stored, want 2 (the 429s create none)", n)
	}
	if err := f.Err(); err != nil {
		t.Error(err)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// An interaction is acknowledged once; a dead token is refused.
func TestInteractionCallbackOnce(t *testing.T) {
	f := newServer(t)
	id, token := f.Interaction()
	url := f.URL() + "api/v9/interactions/" + id + "/" + token + "/callback"
	if resp, _ := do(t, "POST", url, `{"type":5}`); resp.StatusCode != 204 {
		t.Errorf("first callback: %d", resp.StatusCode)
	}
	if resp, body := do(t, "POST", url, `{"type":5}`); resp.StatusCode != 400 || !strings.Contains(body, "40060") {
		t.Errorf("second callback: %d %s, want 400 with code 40060", resp.StatusCode, body)
	}
	f.Advance(TokenLife)
	if resp, _ := do(t, "POST", f.URL()+"api/v9/webhooks/"+AppID+"/"+token, `{"content":"late"}`); resp.StatusCode != 401 {
		t.Errorf("follow-up with a dead token: %d, want 401", resp.StatusCode)
	}
}

func TestErrReportsBodiesThatAreNotJSON(t *testing.T) {
	f := newServer(t)
	do(t, "POST", f.URL()+"api/v9/channels/"+Channel+"/messages", `{not json`)
	if err := f.Err(); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("Err() = %v, want the bad body", err)
	}
}

// gatewayClient is a minimal gateway client: it reads Hello and sends the first op.
func gatewayClient(t *testing.T, f *Server, first any) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(f.gatewayURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var hello struct{ Op int }
	if err := c.ReadJSON(&hello); err != nil || hello.Op != opHello {
		t.Fatalf("hello: op %d, %v", hello.Op, err)
	}
	if err := c.WriteJSON(first); err != nil {
		t.Fatal(err)
	}
	return c
}

type frame struct {
	Op int             `json:"op"`
	T  string          `json:"t"`
	S  int64           `json:"s"`
	D  json.RawMessage `json:"d"`
}

func read(t *testing.T, c *websocket.Conn) frame {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var fr frame
	if err := c.ReadJSON(&fr); err != nil {
		t.Fatal(err)
	}
	return fr
}

// Events dispatched while the client is away, and those after the sequence it resumes
// from, are replayed before RESUMED.
func TestGatewayResumeReplays(t *testing.T) {
	f := newServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := gatewayClient(t, f, map[string]any{"op": opIdentify, "d": map[string]any{"token": "x"}})
	ready := read(t, c)
	var r struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(ready.D, &r); ready.T != "READY" || err != nil || r.SessionID == "" {
		t.Fatalf("first frame %+v", ready)
	}
	if k, err := f.WaitHandshake(ctx); k != "identify" || err != nil {
		t.Fatalf("handshake %q %v", k, err)
	}
	if err := f.Dispatch("MESSAGE_CREATE", map[string]any{"id": "1"}); err != nil {
		t.Fatal(err)
	}
	seen := read(t, c)
	if err := f.Dispatch("MESSAGE_CREATE", map[string]any{"id": "2"}); err != nil {
		t.Fatal(err)
	}
	if err := f.DropGateway(); err != nil {
		t.Fatal(err)
	}
	if f.Connected() {
		t.Error("connected after the drop")
	}
	if err := f.Dispatch("MESSAGE_CREATE", map[string]any{"id": "3"}); err != nil {
		t.Fatal(err)
	}

	c2 := gatewayClient(t, f, map[string]any{"op": opResume, "d": map[string]any{"token": "x", "session_id": r.SessionID, "seq": seen.S}})
	var got []string
	for {
		fr := read(t, c2)
		if fr.T == "RESUMED" {
			break
		}
		var d struct{ ID string }
		json.Unmarshal(fr.D, &d)
		got = append(got, d.ID)
	}
	if strings.Join(got, ",") != "2,3" {
		t.Errorf("replayed %v, want the events after seq %d: 2,3", got, seen.S)
	}
	if k, err := f.WaitHandshake(ctx); k != "resume" || err != nil {
		t.Fatalf("handshake %q %v", k, err)
	}
	if err := c2.WriteJSON(map[string]any{"op": opHeartbeat, "d": 1}); err != nil {
		t.Fatal(err)
	}
	if fr := read(t, c2); fr.Op != opHeartbeatAck {
		t.Errorf("heartbeat answered with %+v", fr)
	}
	if err := f.WaitHeartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Err(); err != nil {
		t.Error(err)
	}
}

func TestGatewayResumeUnknownSession(t *testing.T) {
	f := newServer(t)
	c := gatewayClient(t, f, map[string]any{"op": opResume, "d": map[string]any{"session_id": "nope", "seq": 3}})
	if fr := read(t, c); fr.Op != opInvalidSession {
		t.Errorf("answered %+v, want op 9", fr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.WaitUntil(ctx, func() bool { return f.Err() != nil }); err != nil {
		t.Errorf("the unknown session was not reported: %v", err)
	}
}

// GET /channels/{id}/messages answers as Discord does: newest first, older than before,
// at most limit (50 by default, 100 at most), and 404 for a channel it does not know.
func TestChannelHistory(t *testing.T) {
	f := newServer(t)
	for _, id := range []string{"98", "99", "100", "101"} {
		f.AddHistory(Channel, map[string]any{"id": id, "content": "m" + id})
	}
	base := f.URL() + "api/v9/channels/"
	for _, tc := range []struct {
		query  string
		status int
		want   string
	}{
		{"", 200, "m101 m100 m99 m98"},
		{"?before=101", 200, "m100 m99 m98"},
		{"?before=100&limit=2", 200, "m99 m98"},
		{"?limit=1", 200, "m101"},
		{"?limit=101", 400, ""},
		{"?limit=0", 400, ""},
	} {
		resp, body := do(t, "GET", base+Channel+"/messages"+tc.query, "")
		if resp.StatusCode != tc.status {
			t.Errorf("%q: status %d, want %d", tc.query, resp.StatusCode, tc.status)
			continue
		}
		if tc.status != 200 {
			continue
		}
		var msgs []map[string]any
		if err := json.Unmarshal([]byte(body), &msgs); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range msgs {
			got = append(got, m["content"].(string))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%q: %v, want %s", tc.query, got, tc.want)
		}
	}
	if resp, _ := do(t, "GET", base+"123/messages", ""); resp.StatusCode != 404 {
		t.Errorf("unknown channel: status %d, want 404", resp.StatusCode)
	}
	if r := Find(f.Requests(), "GET", "/api/v9/channels/*/messages"); len(r) == 0 || r[1].Query != "before=101" {
		t.Errorf("request log %+v, want queries kept", r)
	}
}
