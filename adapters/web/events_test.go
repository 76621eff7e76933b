package web

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// sse is one event read from a stream.
type sse struct {
	id, name string
	data     map[string]any
}

// stream is an open event stream of a real server.
type stream struct {
	t    *testing.T
	res  *http.Response
	sc   *bufio.Scanner
	last string // the last event ID seen, as a browser keeps it
}

// openStream opens GET /api/events?query, with extra headers in name, value pairs.
func openStream(t *testing.T, srv *httptest.Server, query, lastID string, hdr ...string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/events?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); res.Body.Close() })
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %s %s", res.Status, res.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	return &stream{t: t, res: res, sc: sc, last: lastID}
}

// next reads the next event; comments and the retry line are skipped.
func (s *stream) next() sse {
	s.t.Helper()
	var ev sse
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if ev.name != "" {
				return ev
			}
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
			s.last = ev.id
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data)
		}
	}
	s.t.Fatalf("stream ended: %v", s.sc.Err())
	return ev
}

// until reads events up to and including the first named name, and returns them.
func (s *stream) until(name string) []sse {
	s.t.Helper()
	var evs []sse
	for {
		ev := s.next()
		evs = append(evs, ev)
		if ev.name == name {
			return evs
		}
	}
}

// nextNamed skips events of other names (thread list updates) and returns the next one
// named name.
func (s *stream) nextNamed(name string) sse {
	s.t.Helper()
	for {
		if ev := s.next(); ev.name == name {
			return ev
		}
	}
}

func msg(text string) bot.Message { return bot.Message{Kind: bot.KindStatus, Text: text} }

func TestStreamPostThenUpdate(t *testing.T) {
	a, srv, _ := newServer(t, Config{})
	ctx := context.Background()
	th := threadRef("t1")
	first, err := a.Post(ctx, th, msg("first"))
	if err != nil {
		t.Fatal(err)
	}
	s := openStream(t, srv, "thread=t1&user=ann", "")
	evs := s.until("sync")
	if evs[0].name != "threads" || evs[1].name != "reset" || evs[2].name != "message" || evs[2].data["id"] != first.ID {
		t.Fatalf("initial events %+v", evs)
	}

	ref, err := a.Post(ctx, th, msg("second"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, ref, msg("second, edited")); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, first, bot.Message{Kind: bot.KindAnswer, Text: "first, edited"}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for range 3 {
		ev := s.nextNamed("message")
		seen = append(seen, ev.data["id"].(string)+" "+firstLine(stripTags(ev.data["html"].(string))))
	}
	want := []string{ref.ID + " second", ref.ID + " second, edited", first.ID + " first, edited"}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Errorf("events in order %q, want %q", seen, want)
	}
	if s.res.Header.Get("Content-Security-Policy") == "" {
		t.Error("the stream has no CSP")
	}
}

// stripTags drops the tags of our own rendering, and the chat row's avatar, name and time
// before the message, for comparing texts.
func stripTags(s string) string {
	if i := strings.Index(s, "<article"); i >= 0 {
		s = s[i:]
	}
	var b strings.Builder
	in := false
	for _, r := range s {
		switch {
		case r == '<':
			in = true
		case r == '>':
			in = false
		case !in:
			b.WriteRune(r)
		}
	}
	return strings.TrimSpace(b.String())
}

func TestStreamResyncWithLastEventID(t *testing.T) {
	a, srv, _ := newServer(t, Config{})
	ctx := context.Background()
	th := threadRef("t1")
	m1, _ := a.Post(ctx, th, msg("one"))
	a.Post(ctx, th, msg("two"))
	s := openStream(t, srv, "thread=t1", "")
	s.until("sync")
	last := s.last
	s.res.Body.Close()

	// While the page is away: one message edited, one posted.
	if err := a.Update(ctx, m1, msg("one, edited")); err != nil {
		t.Fatal(err)
	}
	m3, _ := a.Post(ctx, th, msg("three"))

	s2 := openStream(t, srv, "thread=t1", last)
	var got []string
	for _, ev := range s2.until("sync") {
		switch ev.name {
		case "reset":
			t.Fatal("a known Last-Event-ID got a full snapshot")
		case "message":
			got = append(got, ev.data["id"].(string)+" "+stripTags(ev.data["html"].(string)))
		}
	}
	if want := []string{m1.ID + " one, edited", m3.ID + " three"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("resync sent %q, want %q", got, want)
	}

	// An ID of another process gets a reset and everything.
	s3 := openStream(t, srv, "thread=t1", "feedbeef-3")
	evs := s3.until("sync")
	if evs[1].name != "reset" || len(evs) != 6 {
		t.Errorf("foreign ID: %d events %+v, want threads, reset, 3 messages, sync", len(evs), evs)
	}
}

func TestSlowSubscriberDoesNotBlockPost(t *testing.T) {
	a, srv, _ := newServer(t, Config{})
	a.buffer = 8
	ctx := context.Background()
	th := threadRef("t1")
	a.Post(ctx, th, msg("start"))
	// This page reads the headers and then nothing: its socket fills up, and then its
	// buffer.
	slow := openStream(t, srv, "thread=t1", "")
	big := strings.Repeat("x", 8<<10)
	for i := range 500 {
		if _, err := a.Post(ctx, th, msg(big)); err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
	}
	if n := a.subscribers(); n != 0 {
		t.Errorf("%d subscribers after the slow one fell behind, want it dropped", n)
	}
	slow.res.Body.Close()

	// It reconnects and gets the thread as it is.
	s := openStream(t, srv, "thread=t1", "")
	if got := len(s.until("sync")); got != DefaultMaxMessages+3 {
		t.Errorf("resync after the drop: %d events, want threads, reset, the %d messages held and sync", got, DefaultMaxMessages)
	}
}

// TestNotifyGoesToOneUser has ann and bob, signed in with their own tokens, follow one
// thread; each names the other in the query, as a forger would. A notice for ann reaches
// ann's stream only.
func TestNotifyGoesToOneUser(t *testing.T) {
	a, srv, _ := newServer(t, Config{Users: testUsers, Threads: ThreadsAll})
	ctx := context.Background()
	th := threadRef("t1")
	a.Post(ctx, th, msg("start"))
	ann := openStream(t, srv, "thread=t1&user=bob", "", "Authorization", "Bearer "+annToken)
	bob := openStream(t, srv, "thread=t1&user=ann", "", "Authorization", "Bearer "+bobToken)
	ann.until("sync")
	bob.until("sync")
	if err := a.Notify(ctx, th, "web:ann", "only ann <sees> this"); err != nil {
		t.Fatal(err)
	}
	a.Post(ctx, th, msg("for everyone"))
	if ev := ann.next(); ev.name != "notice" || ev.data["text"] != "only ann <sees> this" {
		t.Errorf("ann got %+v, want the notice", ev)
	}
	for {
		ev := bob.next()
		if ev.name == "notice" {
			t.Fatalf("bob got ann's notice")
		}
		if ev.name == "message" {
			break
		}
	}
}

func TestBounds(t *testing.T) {
	a, err := New(Config{MaxThreads: 2, MaxMessages: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var refs []bot.MessageRef
	for i := range 5 {
		r, err := a.Post(ctx, threadRef("t1"), msg(strings.Repeat("m", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, r)
	}
	if n := len(a.threads["t1"].entries); n != 3 {
		t.Errorf("thread holds %d messages, want 3", n)
	}
	// The status card scrolled out of memory still updates: it comes back at the end.
	if err := a.Update(ctx, refs[0], msg("card")); err != nil {
		t.Fatal(err)
	}
	es := a.threads["t1"].entries
	if es[len(es)-1].id != refs[0].ID {
		t.Errorf("updated message not shown again")
	}
	a.Post(ctx, threadRef("t2"), msg("x"))
	a.Post(ctx, threadRef("t3"), msg("x"))
	if _, ok := a.threads["t1"]; ok || len(a.threads) != 2 {
		t.Errorf("threads %v, want t1 forgotten", a.threads)
	}

	for _, tt := range []struct {
		name string
		err  error
	}{
		{"other platform", func() error {
			_, err := a.Post(ctx, bot.ThreadRef{Platform: "slack", Channel: "C", Thread: "1"}, msg("x"))
			return err
		}()},
		{"bad thread", func() error { _, err := a.Post(ctx, threadRef("<x>"), msg("x")); return err }()},
		{"bad message id", a.Update(ctx, bot.MessageRef{Thread: threadRef("t2")}, msg("x"))},
	} {
		var perm *bot.PermanentError
		if !errorsAs(tt.err, &perm) {
			t.Errorf("%s: err = %v, want a PermanentError", tt.name, tt.err)
		}
	}
}

func errorsAs(err error, target any) bool { return err != nil && errors.As(err, target) }
