package discord

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/adapters/discord/discordfake"
	"github.com/loopbot/loopbot/bot"
)

func TestPostErrors(t *testing.T) {
	thread := bot.ThreadRef{Platform: "discord", Channel: discordfake.Channel, Thread: "700"}
	tests := []struct {
		name      string
		status    int
		body      string
		header    http.Header
		wantWait  time.Duration // a *bot.RateLimitError with this wait
		permanent bool
	}{
		{name: "429 retry_after in body", status: 429, body: `{"message":"You are being rate limited.","retry_after":2.5,"global":false}`,
			header: http.Header{"X-Ratelimit-Reset-After": {"2.5"}, "X-Ratelimit-Remaining": {"0"}}, wantWait: 2500 * time.Millisecond},
		{name: "429 wait in Retry-After only", status: 429, body: `{"message":"You are being rate limited."}`,
			header: http.Header{"Retry-After": {"7"}}, wantWait: 7 * time.Second},
		{name: "429 from a proxy, not JSON", status: 429, body: `slow down`, header: http.Header{"Retry-After": {"3"}}, wantWait: 3 * time.Second},
		{name: "429 that says nothing", status: 429, body: `{}`, wantWait: defaultRetryAfter},
		{name: "403 missing permissions", status: 403, body: `{"code":50013,"message":"Missing Permissions"}`, permanent: true},
		{name: "404 unknown channel", status: 404, body: `{"code":10003,"message":"Unknown Channel"}`, permanent: true},
		{name: "400 invalid form body", status: 400, body: `{"code":50035,"message":"Invalid Form Body"}`, permanent: true},
		{name: "500 is transient", status: 500, body: `{"message":"oops"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFakeDiscord(t)
			a, err := New(testConfig(f))
			if err != nil {
				t.Fatal(err)
			}
			f.Fail("POST", "/api/v9/channels/700/messages", tt.status, tt.body, tt.header)
			_, err = a.Post(context.Background(), thread, bot.Message{Kind: bot.KindNotice, Text: "hi"})
			if err == nil {
				t.Fatal("no error")
			}
			var rl *bot.RateLimitError
			var perm *bot.PermanentError
			switch {
			case tt.wantWait > 0:
				if !errors.As(err, &rl) || rl.RetryAfter != tt.wantWait {
					t.Errorf("err %v, want a rate limit error with %s", err, tt.wantWait)
				}
			case tt.permanent:
				if !errors.As(err, &perm) {
					t.Errorf("err %v, want permanent", err)
				}
			default:
				if errors.As(err, &rl) || errors.As(err, &perm) {
					t.Errorf("err %v, want a transient error", err)
				}
			}
			if n := len(discordfake.Find(f.Requests(), "POST", "/api/v9/channels/700/messages")); n != 1 {
				t.Errorf("%d requests, want 1: the adapter must not retry", n)
			}
			if _, err := a.Post(context.Background(), thread, bot.Message{Kind: bot.KindNotice, Text: "again"}); err != nil {
				t.Errorf("next post: %v", err)
			}
		})
	}
}

// The transport keeps discordgo's limiter idle: no rate limit header reaches it, or it would
// sleep (without a context) until the reset before the next call.
func TestTransportStripsRateLimitHeaders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/base/api/v9/x" {
			t.Errorf("path %s, want the base URL's prefix", r.URL.Path)
		}
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset-After", "3600")
		w.Header().Set("X-RateLimit-Global", "true")
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(429)
	}))
	defer srv.Close()
	base, _ := url.Parse(srv.URL + "/base/")
	tr := &transport{base: base, next: http.DefaultTransport}
	h := &rateHint{}
	req, _ := http.NewRequestWithContext(withRateHint(context.Background(), h), "GET", "https://discord.com/api/v9/x", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for k := range resp.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-ratelimit-") {
			t.Errorf("header %s reached discordgo", k)
		}
	}
	if !h.limited || h.retryAfter != time.Hour {
		t.Errorf("hint %+v, want limited for an hour", h)
	}
	if req.URL.Host != "discord.com" {
		t.Error("the caller's request was changed")
	}
}

func TestUpdateUnknownMessageIsPermanent(t *testing.T) {
	f := NewFakeDiscord(t)
	a, err := New(testConfig(f))
	if err != nil {
		t.Fatal(err)
	}
	err = a.Update(context.Background(), bot.MessageRef{Thread: bot.ThreadRef{Thread: "700"}, ID: "404"}, bot.Message{Kind: bot.KindStatus, Title: "x"})
	var perm *bot.PermanentError
	if !errors.As(err, &perm) {
		t.Errorf("err %v, want permanent", err)
	}
}

func TestPostLongAnswer(t *testing.T) {
	f := NewFakeDiscord(t)
	a, err := New(testConfig(f))
	if err != nil {
		t.Fatal(err)
	}
	thread := bot.ThreadRef{Platform: "discord", Channel: discordfake.Channel, Thread: "700"}
	long := strings.Repeat("A paragraph of the answer that goes on for a while.\n\n", 300)
	if _, err := a.Post(context.Background(), thread, bot.Message{Kind: bot.KindAnswer, Text: long}); err != nil {
		t.Fatal(err)
	}
	posts := discordfake.Find(f.Requests(), "POST", "/api/v9/channels/700/messages")
	if len(posts) != 1 || posts[0].Files["answer.md"] != long {
		t.Fatalf("want one message with the answer attached; got %d, files %v", len(posts), len(posts[0].Files))
	}
	if c := posts[0].Body["content"].(string); len(c) > maxContent {
		t.Errorf("preview is %d bytes", len(c))
	}
}

// A text of two messages whose second part is refused with a 429 is retried by the bot as a
// whole; the retry posts only the second part, so the thread shows each part once. The same
// text posted again later is a new message and goes out in full.
func TestPostRetryAfterPartialFailure(t *testing.T) {
	f := NewFakeDiscord(t)
	a, err := New(testConfig(f))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	thread := bot.ThreadRef{Platform: "discord", Channel: discordfake.Channel, Thread: "700"}
	var text strings.Builder
	for i := range 40 {
		fmt.Fprintf(&text, "Paragraph %02d of a long answer, long enough to need two messages.\n\n", i)
	}
	msg := bot.Message{Kind: bot.KindAnswer, Text: text.String()}
	if n := len(render(msg)); n != 2 {
		t.Fatalf("the text renders as %d messages, want 2", n)
	}
	route := "/api/v9/channels/700/messages"
	fl := discordfake.RateLimitFault("POST", route, 1, time.Second)
	fl.Skip = 1
	f.Inject(fl)

	_, err = a.Post(ctx, thread, msg)
	var rl *bot.RateLimitError
	if !errors.As(err, &rl) {
		t.Fatalf("first attempt: %v, want a rate limit error", err)
	}
	ref, err := a.Post(ctx, thread, msg)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	msgs := f.ChannelMessages("700")
	if len(msgs) != 2 || msgs[0].Payload["content"] == msgs[1].Payload["content"] || ref.ID != msgs[0].ID {
		t.Fatalf("after the retry the thread has %d messages (ref %s): %+v; want the two parts once, ref the first", len(msgs), ref.ID, msgs)
	}
	if n := len(discordfake.Find(f.Requests(), "POST", route)); n != 3 {
		t.Errorf("%d posts, want 3: part one, part two refused, part two again", n)
	}
	if _, err := a.Post(ctx, thread, msg); err != nil {
		t.Fatal(err)
	}
	if n := len(f.ChannelMessages("700")); n != 4 {
		t.Errorf("posting the same text again left %d messages, want 4", n)
	}
}

func TestRegisterCommandsPerGuild(t *testing.T) {
	f := NewFakeDiscord(t)
	cfg := testConfig(f)
	cfg.GuildIDs = []string{"11", "12"}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.registerCommands(context.Background()); err != nil {
		t.Fatal(err)
	}
	reqs := f.Requests()
	for _, g := range cfg.GuildIDs {
		if got := discordfake.Find(reqs, "PUT", "/api/v9/applications/"+discordfake.AppID+"/guilds/"+g+"/commands"); len(got) != 1 {
			t.Errorf("guild %s: %d registrations", g, len(got))
		}
	}
	if got := discordfake.Find(reqs, "PUT", "/api/v9/applications/"+discordfake.AppID+"/commands"); len(got) != 0 {
		t.Error("registered globally too")
	}
}

// sign signs body as Discord does, at ts.
func sign(priv ed25519.PrivateKey, ts time.Time, body []byte) (sig, stamp string) {
	stamp = strconv.FormatInt(ts.Unix(), 10)
	return hex.EncodeToString(ed25519.Sign(priv, append([]byte(stamp), body...))), stamp
}

func TestHTTPInteractions(t *testing.T) {
	f := NewFakeDiscord(t)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(f)
	cfg.Mode, cfg.PublicKey, cfg.ListenAddr = ModeHTTP, hex.EncodeToString(pub), "127.0.0.1:0"
	a, err := New(cfg, WithClock(f.Now))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(f)
	srv := httptest.NewServer(a.InteractionsHandler(context.Background(), rec))
	defer srv.Close()
	defer a.Close()

	ping := []byte(`{"id":"1","application_id":"` + discordfake.AppID + `","type":1,"token":"t","version":1}`)
	id, token := f.Interaction()
	slash, _ := json.Marshal(discordfake.SlashPayload(id, token, discordfake.Channel, "", "loopbot", discordfake.GoalOption("from http")))
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	now := f.Now()
	tests := []struct {
		name       string
		body       []byte
		key        ed25519.PrivateKey
		at         time.Time
		tamper     bool
		wantStatus int
		wantType   float64
	}{
		{name: "ping", body: ping, key: priv, at: now, wantStatus: 200, wantType: 1},
		{name: "bad signature", body: ping, key: otherPriv, at: now, wantStatus: 401},
		{name: "body changed after signing", body: ping, key: priv, at: now, tamper: true, wantStatus: 401},
		{name: "stale timestamp", body: ping, key: priv, at: now.Add(-6 * time.Minute), wantStatus: 401},
		{name: "future timestamp", body: ping, key: priv, at: now.Add(6 * time.Minute), wantStatus: 401},
		{name: "no signature", body: ping, wantStatus: 401},
		{name: "slash command", body: slash, key: priv, at: now, wantStatus: 200, wantType: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(string(tt.body)))
			if tt.key != nil {
				sig, stamp := sign(tt.key, tt.at, tt.body)
				req.Header.Set("X-Signature-Ed25519", sig)
				req.Header.Set("X-Signature-Timestamp", stamp)
			}
			if tt.tamper {
				req.Body = io.NopCloser(strings.NewReader(string(tt.body) + " "))
				req.ContentLength++
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if tt.wantType == 0 {
				return
			}
			var got map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got["type"] != tt.wantType {
				t.Errorf("response %v (%v), want type %v", got, err, tt.wantType)
			}
		})
	}
	// The slash command's deferred response was the HTTP response: no callback request,
	// then the thread and the event.
	ev := rec.next(t)
	if ev.Text != "from http" || ev.Thread.Thread != "orig-"+token {
		t.Errorf("event %+v", ev)
	}
	if cb := discordfake.Find(f.Requests(), "POST", "/api/v9/interactions/*/*/callback"); len(cb) != 0 {
		t.Errorf("HTTP mode also called the callback route: %v", cb)
	}
}

func TestVerifySignature(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"type":1}`)
	sig, stamp := sign(priv, now, body)
	tests := []struct {
		name       string
		key        ed25519.PublicKey
		sig, stamp string
		body       []byte
		want       bool
	}{
		{"good", pub, sig, stamp, body, true},
		{"edge of the window", pub, sig, stamp, body, true},
		{"not hex", pub, "zz", stamp, body, false},
		{"short signature", pub, sig[:10], stamp, body, false},
		{"timestamp not a number", pub, sig, "now", body, false},
		{"other timestamp", pub, sig, strconv.FormatInt(now.Unix()+1, 10), body, false},
		{"no key", nil, sig, stamp, body, false},
	}
	for _, tt := range tests {
		at := now
		if tt.name == "edge of the window" {
			at = now.Add(maxTimestampSkew)
		}
		if got := verifySignature(tt.key, tt.sig, tt.stamp, tt.body, at); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
