package web

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// memView is a ViewStore and a bot.Notifier in memory, as the stores implement them: rows
// numbered in the order written, a replaced row keeping its position, a tombstone for a
// forgotten thread. drop, when set, is asked whether to lose each notification.
type memView struct {
	mu   sync.Mutex
	seq  uint64
	rows map[[2]string]memRow
	subs []chan bot.Notification
	drop func(payload string) bool
}

type memRow struct {
	seq, pos uint64
	data     []byte
}

func newMemView() *memView { return &memView{rows: map[[2]string]memRow{}} }

func (m *memView) put(thread, key string, data []byte) uint64 {
	m.seq++
	pos := m.seq
	if old, ok := m.rows[[2]string{thread, key}]; ok {
		pos = old.pos
	}
	m.rows[[2]string{thread, key}] = memRow{m.seq, pos, data}
	return m.seq
}

func (m *memView) PutConsoleRow(ctx context.Context, thread, key string, data []byte) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.put(thread, key, append([]byte{}, data...)), nil
}

func (m *memView) DeleteConsoleRows(ctx context.Context, thread string, keys ...string) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(keys) > 0 {
		for _, k := range keys {
			delete(m.rows, [2]string{thread, k})
		}
		return 0, nil
	}
	for k := range m.rows {
		if k[0] == thread && k[1] != "" {
			delete(m.rows, k)
		}
	}
	return m.put(thread, "", nil), nil
}

func (m *memView) ConsoleRows(ctx context.Context, after uint64, fn func(seq, pos uint64, thread, key string, data []byte) error) error {
	m.mu.Lock()
	type row struct {
		k [2]string
		r memRow
	}
	var out []row
	for k, r := range m.rows {
		if r.seq > after {
			out = append(out, row{k, r})
		}
	}
	m.mu.Unlock()
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j].r.seq < out[i].r.seq {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	for _, r := range out {
		if err := fn(r.r.seq, r.r.pos, r.k[0], r.k[1], r.r.data); err != nil {
			return err
		}
	}
	return nil
}

func (m *memView) Notify(ctx context.Context, channel, payload string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.drop != nil && m.drop(payload) {
		return nil
	}
	for _, s := range m.subs {
		s <- bot.Notification{Channel: channel, Payload: payload}
	}
	return nil
}

func (m *memView) Listen(ctx context.Context, channels ...string) <-chan bot.Notification {
	ch := make(chan bot.Notification, 64)
	ch <- bot.Notification{Channel: bot.ChannelConsole}
	m.mu.Lock()
	m.subs = append(m.subs, ch)
	m.mu.Unlock()
	return ch
}

// sharedConsole opens a console on v whose poll is the returned channel.
func sharedConsole(t *testing.T, v *memView, opts ...Option) (*Adapter, chan time.Time) {
	t.Helper()
	tick := make(chan time.Time)
	a, _, _ := newServer(t, Config{}, append([]Option{WithViewStore(v), func(a *Adapter) { a.viewPoll = tick }}, opts...)...)
	t.Cleanup(func() { a.Close() })
	return a, tick
}

// waitView waits until cond holds of a's view, failing after ten seconds.
func waitView(t *testing.T, a *Adapter, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func threadHTML(a *Adapter, id string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.threads[id]
	if !ok {
		return ""
	}
	var b strings.Builder
	for _, e := range t.entries {
		b.WriteString(e.html)
	}
	return b.String() + "<live>" + t.live
}

// TestSharedViewAcrossConsoles: what one console posts, edits and streams, the other shows
// to its page as it happens, told by the store's notification; the answer replaces the
// live text on both.
func TestSharedViewAcrossConsoles(t *testing.T) {
	ctx := context.Background()
	v := newMemView()
	a, _ := sharedConsole(t, v)
	b, _ := sharedConsole(t, v)
	_, srvB, _ := newServer(t, Config{}) // only for its handler type; b serves below
	srvB.Config.Handler = b.HTTPHandler(&recorder{})
	th := threadRef("t1")
	ref, err := a.Post(ctx, th, bot.Message{Kind: bot.KindStatus, Title: "deploy the site", Text: "Working"})
	if err != nil {
		t.Fatal(err)
	}
	waitView(t, b, "the card on b", func() bool { return strings.Contains(threadHTML(b, "t1"), "Working") })
	s := openStream(t, srvB, "thread=t1", "")
	s.until("sync")
	if err := a.Update(ctx, ref, bot.Message{Kind: bot.KindStatus, Title: "deploy the site", Text: "Step 2"}); err != nil {
		t.Fatal(err)
	}
	if ev := s.nextNamed("message"); !strings.Contains(ev.data["html"].(string), "Step 2") {
		t.Errorf("b's page got %s, want the edited card", ev.data)
	}
	stream := bot.Stream{Thread: th, RunID: "run-1"}
	if err := a.StreamText(ctx, stream, "Deploying "); err != nil {
		t.Fatal(err)
	}
	if err := a.StreamText(ctx, stream, "now."); err != nil {
		t.Fatal(err)
	}
	if ev := s.nextNamed("stream"); !strings.Contains(ev.data["html"].(string), "Deploying") {
		t.Errorf("b's page got %s, want the live text", ev.data)
	}
	waitView(t, b, "the whole live text on b", func() bool { return strings.Contains(threadHTML(b, "t1"), "<live>Deploying now.") })
	if _, err := a.Post(ctx, th, bot.Message{Kind: bot.KindAnswer, Text: "Deployed."}); err != nil {
		t.Fatal(err)
	}
	waitView(t, b, "the answer on b", func() bool {
		h := threadHTML(b, "t1")
		return strings.Contains(h, "Deployed.") && strings.HasSuffix(h, "<live>")
	})
	// The card edited after the answer keeps its place, on a console that reads the view
	// afresh too (the card's row is now the latest).
	if err := a.Update(ctx, ref, bot.Message{Kind: bot.KindStatus, Title: "deploy the site", Text: "Done"}); err != nil {
		t.Fatal(err)
	}
	c, _ := sharedConsole(t, v)
	waitView(t, b, "the last edit on b", func() bool { return b.appliedSeq() == a.appliedSeq() })
	for _, x := range []*Adapter{b, c} {
		if threadHTML(a, "t1") != threadHTML(x, "t1") {
			t.Errorf("the consoles differ:\na: %s\nother: %s", threadHTML(a, "t1"), threadHTML(x, "t1"))
		}
	}
	// The event IDs are the view's numbers: b's page may reconnect to a and get only what
	// changed since.
	if a.appliedSeq() != b.appliedSeq() || a.epoch != b.epoch {
		t.Errorf("a is at %s-%d, b at %s-%d", a.epoch, a.appliedSeq(), b.epoch, b.appliedSeq())
	}
}

// TestSharedViewNotifications: a notification of a number the console has applied reads
// nothing; a lost notification loses nothing, as the next one, or the poll, reads
// everything past the last number applied.
func TestSharedViewNotifications(t *testing.T) {
	ctx := context.Background()
	v := newMemView()
	a, _ := sharedConsole(t, v)
	b, tickB := sharedConsole(t, v)
	th := threadRef("t1")
	a.Post(ctx, th, bot.Message{Kind: bot.KindStatus, Text: "one"})
	waitView(t, b, "b to apply the first post", func() bool { return b.appliedSeq() == a.appliedSeq() })
	reads := func(x *Adapter) int64 {
		x.mu.Lock()
		defer x.mu.Unlock()
		return x.sh.reads
	}
	before := reads(b)
	v.Notify(ctx, bot.ChannelConsole, "1")
	v.Notify(ctx, bot.ChannelConsole, "2")
	a.Post(ctx, th, bot.Message{Kind: bot.KindStatus, Text: "two"})
	waitView(t, b, "b to apply the second post", func() bool { return b.appliedSeq() == a.appliedSeq() })
	// The follower handles notifications in order: by now it has seen the two stale ones.
	if got := reads(b) - before; got != 1 {
		t.Errorf("b read the store %d times for two notifications of numbers it had applied and one new, want once", got)
	}
	lost := a.appliedSeq()
	v.mu.Lock()
	v.drop = func(p string) bool { return p != "" }
	v.mu.Unlock()
	a.Post(ctx, th, bot.Message{Kind: bot.KindStatus, Text: "three, its notification lost"})
	if b.appliedSeq() != lost {
		t.Fatalf("b applied %d without a notification", b.appliedSeq())
	}
	v.mu.Lock()
	v.drop = nil
	v.mu.Unlock()
	a.Post(ctx, th, bot.Message{Kind: bot.KindStatus, Text: "four"})
	waitView(t, b, "the next notification to bring the lost change", func() bool {
		h := threadHTML(b, "t1")
		return strings.Contains(h, "three, its notification lost") && strings.Contains(h, "four")
	})
	// With every notification lost, the poll finds the change.
	v.mu.Lock()
	v.drop = func(string) bool { return true }
	v.mu.Unlock()
	a.Post(ctx, th, bot.Message{Kind: bot.KindStatus, Text: "five, found by the poll"})
	tickB <- time.Now()
	waitView(t, b, "the poll to bring the change", func() bool { return strings.Contains(threadHTML(b, "t1"), "five, found by the poll") })
}

// TestSharedViewImportsHistory: a console upgraded to a shared view imports the history
// file once (it is renamed after), shows what it showed before, and a console opened on the
// store after a restart rebuilds the same view from it, with the same thread opened by a
// goal sent again.
func TestSharedViewImportsHistory(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loopbot.db.console")
	a1, srv1, _ := newServer(t, Config{}, WithHistory(path, 0))
	_, body := post(t, srv1, "/api/threads", goal("goal-0001", "", "deploy the site"))
	id := body["thread"].(string)
	th := threadRef(id)
	status, _ := a1.Post(ctx, th, bot.Message{Kind: bot.KindStatus, Title: "deploy the site", Text: "Working"})
	a1.Post(ctx, th, bot.Message{Kind: bot.KindApproval, Title: "Approve deploy?", Buttons: []bot.Button{{ID: "act-approve", Label: "Approve"}}})
	a1.Update(ctx, status, bot.Message{Kind: bot.KindStatus, Title: "deploy the site", Text: "Waiting for approval"})
	a1.Post(ctx, threadRef("t2"), bot.Message{Kind: bot.KindStatus, Title: "summarise the issues", Text: "Queued"})
	title, msgs := view(t, a1, id)
	if err := a1.Close(); err != nil {
		t.Fatal(err)
	}

	v := newMemView()
	a2, _ := sharedConsole(t, v, WithHistory(path, 0))
	title2, msgs2 := view(t, a2, id)
	if title2 != title || strings.Join(msgs2, "\n") != strings.Join(msgs, "\n") {
		t.Errorf("after the import: %q %q\nwant %q %q", title2, msgs2, title, msgs)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the history file is still there after the import: %v", err)
	}
	if _, err := os.Stat(path + ".imported"); err != nil {
		t.Errorf("the imported history file was not kept aside: %v", err)
	}
	a2.Close()

	// A restart: the view comes from the store alone, and the file is not imported again.
	a3, _ := sharedConsole(t, v, WithHistory(path, 0))
	title3, msgs3 := view(t, a3, id)
	if title3 != title || strings.Join(msgs3, "\n") != strings.Join(msgs, "\n") {
		t.Errorf("after the restart: %q %q\nwant %q %q", title3, msgs3, title, msgs)
	}
	if title, _ := view(t, a3, "t2"); title != "summarise the issues" {
		t.Errorf("t2 after the restart is named %q", title)
	}
	_, srv3, _ := newServer(t, Config{})
	srv3.Config.Handler = a3.HTTPHandler(&recorder{})
	if _, body := post(t, srv3, "/api/threads", goal("goal-0001", "", "deploy the site")); body["thread"] != id {
		t.Errorf("the same goal sent again after the restart went to %v, want %s", body["thread"], id)
	}
	if err := a3.Update(ctx, status, bot.Message{Kind: bot.KindStatus, Title: "deploy the site", Text: "Approved"}); err != nil {
		t.Fatal(err)
	}
	if _, msgs := view(t, a3, id); len(msgs) != len(msgs3) || !strings.Contains(msgs[1], "Approved") {
		t.Errorf("an edit after the restart did not change the card in place: %q", msgs)
	}
}

// TestSharedViewForgetsAndTrims: the view stays within MaxThreads and MaxMessages on every
// console, and what a console forgot is gone from the store too.
func TestSharedViewForgetsAndTrims(t *testing.T) {
	ctx := context.Background()
	v := newMemView()
	a, _ := sharedConsole(t, v, func(a *Adapter) { a.cfg.MaxThreads, a.cfg.MaxMessages = 2, 3 })
	for i, id := range []string{"t1", "t2", "t3"} {
		a.Post(ctx, threadRef(id), bot.Message{Kind: bot.KindStatus, Text: "card " + id})
		_ = i
	}
	for i := range 5 {
		a.Post(ctx, threadRef("t3"), bot.Message{Kind: bot.KindNotice, Text: "note " + string(rune('a'+i))})
	}
	b, _ := sharedConsole(t, v)
	for _, x := range []*Adapter{a, b} {
		x.mu.Lock()
		_, has1 := x.threads["t1"]
		n := len(x.threads)
		entries := len(x.threads["t3"].entries)
		x.mu.Unlock()
		if has1 || n != 2 {
			t.Errorf("a console holds %d threads (t1: %v), want t2 and t3", n, has1)
		}
		if entries != 3 {
			t.Errorf("t3 holds %d messages, want 3", entries)
		}
	}
	if h := threadHTML(b, "t3"); strings.Contains(h, "note b") || !strings.Contains(h, "note e") {
		t.Errorf("t3 on a console opened after: %s", h)
	}
}

// TestSharedViewStreamOnAThreadOpenedElsewhere: the replica running a run streams to a
// thread another replica opened, whose notification it has not had: it reads the view
// first, and the live text reaches the console that opened the thread.
func TestSharedViewStreamOnAThreadOpenedElsewhere(t *testing.T) {
	ctx := context.Background()
	v := newMemView()
	a, _ := sharedConsole(t, v)
	b, _ := sharedConsole(t, v)
	v.mu.Lock()
	v.drop = func(string) bool { return true }
	v.mu.Unlock()
	b.Post(ctx, threadRef("t1"), bot.Message{Kind: bot.KindStatus, Text: "Working"})
	v.mu.Lock()
	v.drop = nil
	v.mu.Unlock()
	if err := a.StreamText(ctx, bot.Stream{Thread: threadRef("t1"), RunID: "run-1"}, "Partial "); err != nil {
		t.Fatal(err)
	}
	waitView(t, b, "the live text on b", func() bool { return strings.HasSuffix(threadHTML(b, "t1"), "<live>Partial ") })
}
