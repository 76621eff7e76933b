package slack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

const secret = "8f742231b10e8888abcd99yyyzzz85a5"

// sign returns Slack's v0 signature headers for body at time at.
func sign(body string, at time.Time, key string) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte("v0:" + ts + ":" + body))
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return h
}

// serveHTTP starts an HTTP mode adapter against the fake Web API and returns its base URL.
// opts apply after the test's logger.
func serveHTTP(t *testing.T, f *fakeSlack, h bot.Handler, opts ...Option) string {
	t.Helper()
	opts = append([]Option{WithLogger(slog.New(slog.NewTextHandler(testWriter{t}, nil)))}, opts...)
	a, err := New(Config{Mode: ModeHTTP, BotToken: "xoxb-test", SigningSecret: secret, APIURL: f.apiURL()}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	// Serve calls auth.test before it accepts requests; the listener queues them meanwhile.
	return "http://" + ln.Addr().String()
}

func post(t *testing.T, u, contentType, body string, h http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHTTPSignatures(t *testing.T) {
	f := newFakeSlack(t)
	rec := newRecorder()
	base := serveHTTP(t, f, rec)
	b, _ := json.Marshal(mentionCallback("EvH", "C1", "1700000000.000100", "", "<@UBOT> hello"))
	body := string(b)
	now := time.Now()
	tests := []struct {
		name    string
		body    string
		headers http.Header
		status  int
	}{
		{"bad signature", body, sign(body, now, "wrong-secret"), http.StatusUnauthorized},
		{"old timestamp", body, sign(body, now.Add(-6*time.Minute), secret), http.StatusUnauthorized},
		{"future timestamp", body, sign(body, now.Add(6*time.Minute), secret), http.StatusUnauthorized},
		{"tampered body", strings.Replace(body, "hello", "rm -rf", 1), sign(body, now, secret), http.StatusUnauthorized},
		{"no signature", body, http.Header{}, http.StatusUnauthorized},
		{"good", body, sign(body, now, secret), http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, _ := post(t, base+PathEvents, "application/json", tc.body, tc.headers)
			if status != tc.status {
				t.Fatalf("status %d, want %d", status, tc.status)
			}
		})
	}
	if ev := rec.next(t); ev.ID != "EvH" || ev.Text != "hello" || ev.Kind != bot.EventMention {
		t.Fatalf("handled %+v", ev)
	}
	rec.none(t)
}

func TestHTTPURLVerification(t *testing.T) {
	f := newFakeSlack(t)
	base := serveHTTP(t, f, newRecorder())
	body := `{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
	status, got := post(t, base+PathEvents, "application/json", body, sign(body, time.Now(), secret))
	if status != http.StatusOK || !strings.Contains(got, `"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"`) {
		t.Fatalf("status %d body %s", status, got)
	}
	status, _ = post(t, base+PathEvents, "application/json", body, sign(body, time.Now(), "nope"))
	if status != http.StatusUnauthorized {
		t.Fatalf("unsigned url_verification: status %d", status)
	}
}

func TestHTTPInteractionAndCommand(t *testing.T) {
	f := newFakeSlack(t)
	rec := newRecorder()
	rec.result = func(ev bot.Event) bot.Result {
		if ev.Kind == bot.EventAction {
			return bot.Result{Notice: "This button is no longer valid."}
		}
		return bot.Result{}
	}
	base := serveHTTP(t, f, rec)

	p, _ := json.Marshal(clickPayload("trig-h", "opaque-reject"))
	body := url.Values{"payload": {string(p)}}.Encode()
	if status, _ := post(t, base+PathInteractions, "application/x-www-form-urlencoded", body, sign(body, time.Now(), secret)); status != http.StatusOK {
		t.Fatalf("interaction status %d", status)
	}
	if ev := rec.next(t); ev.Kind != bot.EventAction || ev.ActionID != "opaque-reject" || ev.ID != "action:trig-h" {
		t.Fatalf("click %+v", ev)
	}
	if c := f.nextCall("chat.postEphemeral"); c.Values.Get("user") != "U2" || c.Values.Get("text") != "This button is no longer valid." {
		t.Errorf("notice %v", c.Values)
	}

	cmd := url.Values{"team_id": {teamID}, "channel_id": {"C1"}, "user_id": {"U1"}, "user_name": {"ann"}, "command": {"/loopbot"},
		"text": {"status"}, "trigger_id": {"trig-c"}, "response_url": {f.apiURL() + "response_url"}}.Encode()
	status, got := post(t, base+PathCommands, "application/x-www-form-urlencoded", cmd, sign(cmd, time.Now(), secret))
	if status != http.StatusOK || !strings.Contains(got, `"response_type":"ephemeral"`) || !strings.Contains(got, "does not tell apps which thread") {
		t.Fatalf("status command: %d %s", status, got)
	}
	rec.none(t)
}
