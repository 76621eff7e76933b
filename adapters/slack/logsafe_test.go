package slack

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// TestResponseURLNotLogged sends a slash command whose response_url cannot be reached: the
// notice fails and is logged, and the log must not hold the URL's secret path.
func TestResponseURLNotLogged(t *testing.T) {
	// A listener that is closed at once: every POST to it fails with the URL in the error.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/commands/T1/1700/s3cr3tResponsePath"
	ln.Close()

	f := newFakeSlack(t)
	rec := newRecorder()
	rec.result = func(bot.Event) bot.Result { return bot.Result{Notice: "Queued."} }
	logs := &lockedBuffer{warned: make(chan struct{}, 1)}
	f.adapter(rec, Config{AllowedChannels: []string{"C1"}}, WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	f.conn()
	f.send("slash_commands", "env-start", map[string]any{"token": "x", "team_id": teamID, "channel_id": "C1", "user_id": "U1",
		"user_name": "ann", "command": "/loopbot", "text": "fix the build", "trigger_id": "trig-1", "response_url": dead})
	f.nextAck()
	rec.next(t)
	<-logs.warned
	out := logs.String()
	if !strings.Contains(out, "notice to user") {
		t.Fatalf("the failed notice was not logged:\n%s", out)
	}
	if strings.Contains(out, "s3cr3tResponsePath") || strings.Contains(out, "/commands/") {
		t.Fatalf("the response_url reached the log:\n%s", out)
	}
}

func TestLogSafe(t *testing.T) {
	tests := []struct{ in, want string }{
		{`Post "https://hooks.slack.com/commands/T1/2/abc": dial tcp: refused`, `Post "https://hooks.slack.com/…": dial tcp: refused`},
		{"no url here", "no url here"},
		{"https://slack.com", "https://slack.com"},
		{"two https://a.example/x?token=1 and http://b.example/y", "two https://a.example/… and http://b.example/…"},
	}
	for _, tt := range tests {
		if got := logSafe(errors.New(tt.in)); got != tt.want {
			t.Errorf("logSafe(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	_, err := http.Post("http://127.0.0.1:1/commands/secret", "text/plain", nil)
	if err == nil || strings.Contains(logSafe(err), "secret") {
		t.Errorf("logSafe of a client error = %q", logSafe(err))
	}
}

// lockedBuffer is a log sink safe for the adapter's goroutines; warned fires on the first
// warning.
type lockedBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	warned chan struct{}
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bytes.Contains(p, []byte("level=WARN")) {
		select {
		case b.warned <- struct{}{}:
		default:
		}
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
