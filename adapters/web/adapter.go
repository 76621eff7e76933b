package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/bot/text"
)

var _ bot.Platform = (*Adapter)(nil)

// PlatformName is the adapter's name in bot.ThreadRef.Platform.
const PlatformName = "web"

// channel is the ThreadRef.Channel of every console thread: the console has one room.
const channel = "console"

// subscriberBuffer is how many events a browser may be behind before it is dropped and
// left to resync on reconnect.
const subscriberBuffer = 256

// Adapter is loopbot's web console platform. Build it with New; serve it with Run, Serve or
// HTTPHandler. It is safe for concurrent use.
type Adapter struct {
	cfg   Config
	now   func() time.Time
	log   *slog.Logger
	index *indexPage
	// epoch tells this process's event and message IDs from a previous one's, so that a
	// browser reconnecting after a restart gets a full snapshot.
	epoch  string
	buffer int
	// auth decides who each request comes from.
	auth *authenticator
	// policy holds the bot's approver rules, which decide who sees every thread and
	// whether this console can be started as configured.
	policy bot.Policy
	// seeAll are the user IDs that see every thread: the bot's approvers and Viewers.
	seeAll []string
	// warning is shown on every page when approver rules cannot be enforced here.
	warning string
	// hist keeps the view across restarts (WithHistory); nil keeps it in memory only.
	hist      *history
	histPath  string
	histLimit int64
	// vs keeps the view when replicas share it (WithViewStore, viewstore.go); sh follows
	// it. viewPoll replaces the poll's ticker in tests.
	vs       ViewStore
	sh       *shared
	viewPoll <-chan time.Time
	// idTag makes this process's message IDs its own.
	idTag string
	// workspace returns a run's workspace directory, for the view of the files it wrote
	// (WithWorkspaces, files.go); nil serves none.
	workspace func(runID string) string

	mu      sync.Mutex
	seq     uint64 // the last change's sequence number
	msgs    uint64 // messages created, for their IDs
	threads map[string]*thread
	subs    map[*subscriber]struct{}
	closed  bool // no new subscribers: the server is shutting down
}

// thread is one console thread as the page shows it.
type thread struct {
	id      string
	title   string
	status  string
	created time.Time
	updated time.Time
	// mention is the delivery ID of the goal that opened it, so a goal submitted twice
	// opens one thread.
	mention string
	entries []*entry
	// live is the answer being written, as streamed so far (stream.go).
	live string
}

// entry is one message of a thread, as last rendered.
type entry struct {
	id   string
	pos  uint64 // the sequence number it was created at: its place in the thread
	seq  uint64 // the sequence number of its last change
	kind string // a bot.MessageKind, or kindUser for what a person typed
	sent time.Time
	// msg is the bot's message; user and text are a person's.
	msg  bot.Message
	user string
	text string
	html string
	// event is the delivery that added a person's message, so a double submit adds it once.
	event string
}

// kindUser is the kind of an entry a person typed.
const kindUser = "user"

// render renders e, of thread t, as the page shows it: a chat row with its author, avatar
// and time. A status card whose title is a goal the thread shows as a person's message
// (the bot titles a run's card with its goal) goes without it, so the goal is not shown
// twice.
func (e *entry) render(t *thread) {
	if e.kind == kindUser {
		e.html = renderRow(e.user, e.sent, renderUserMessage(e.text))
		return
	}
	m := e.msg
	if m.Kind == bot.KindStatus && t.shows(m.Title) {
		m.Title = ""
	}
	e.html = renderRow("", e.sent, renderMessage(m))
}

// shows reports whether title is the text of a person's message in t, or its start cut
// with an ellipsis.
func (t *thread) shows(title string) bool {
	if title == "" {
		return false
	}
	cut, clipped := strings.CutSuffix(title, text.Ellipsis)
	for _, e := range t.entries {
		if e.kind != kindUser {
			continue
		}
		goal := strings.TrimSpace(e.text)
		if goal == title || clipped && strings.HasPrefix(goal, cut) {
			return true
		}
	}
	return false
}

// record is e as a line of the history; at is when it changed.
func (e *entry) record(threadID string, at time.Time) record {
	r := record{Op: opEntry, Thread: threadID, At: at, Sent: e.sent, ID: e.id, Kind: e.kind, Event: e.event}
	if e.kind == kindUser {
		r.User, r.Text = e.user, e.text
	} else {
		m := e.msg
		r.Msg = &m
	}
	return r
}

// Option configures an Adapter.
type Option func(*Adapter)

// WithClock sets the clock of thread timestamps.
func WithClock(now func() time.Time) Option { return func(a *Adapter) { a.now = now } }

// WithLogger sets the logger for what the console's users are not shown.
func WithLogger(l *slog.Logger) Option { return func(a *Adapter) { a.log = l } }

// WithHistory keeps the console's view in a file at path, so that after a restart its
// threads and messages are as they were (history.go). cmd/loopbot puts it next to the
// bot's database. limit is the size past which the file is rewritten to what the console
// holds; zero means DefaultHistoryBytes.
func WithHistory(path string, limit int64) Option {
	return func(a *Adapter) { a.histPath, a.histLimit = path, limit }
}

// WithPolicy tells the console the bot's approver rules. Its approvers see every thread
// (they may decide on any run), and rules that need to tell people apart decide whether
// a console that cannot do so may start: see New.
func WithPolicy(p bot.Policy) Option { return func(a *Adapter) { a.policy = p } }

// New validates cfg and builds an Adapter.
//
// A console whose people are one identity (no users and no trusted proxy) cannot enforce
// approver rules that need two people (WithPolicy: approvers, approve_by = "approvers",
// dangerous_needs_other, which is on unless set off). Exposed beyond loopback with a shared
// token, New refuses it: someone set it up for several people, and the rules would quietly
// mean nothing. On loopback it is the single-person console of one machine's user, and the
// demo must start with the default policy, so New logs a warning and every page says it.
// The rules still fail closed there: the one person cannot approve their own dangerous call.
func New(cfg Config, opts ...Option) (*Adapter, error) {
	cfg, err := cfg.check()
	if err != nil {
		return nil, fmt.Errorf("new web console: %w", err)
	}
	auth, err := newAuthenticator(cfg)
	if err != nil {
		return nil, fmt.Errorf("new web console: %w", err)
	}
	index, err := parseIndexPage(indexHTML)
	if err != nil {
		return nil, fmt.Errorf("new web console: parse index page: %w", err)
	}
	a := &Adapter{
		cfg:     cfg,
		now:     time.Now,
		log:     slog.Default(),
		index:   index,
		epoch:   randomID(4),
		buffer:  subscriberBuffer,
		threads: map[string]*thread{},
		subs:    map[*subscriber]struct{}{},
		auth:    auth,
	}
	for _, o := range opts {
		o(a)
	}
	a.idTag = a.epoch
	if a.vs != nil {
		// Event IDs are the shared view's numbers, the same on every replica.
		a.epoch = "v"
	}
	a.seeAll = slices.Clone(a.policy.Approvers)
	for _, v := range cfg.Viewers {
		a.seeAll = append(a.seeAll, userPrefix+v)
	}
	if err := a.checkIdentityRules(cfg.Addr); err != nil {
		return nil, fmt.Errorf("new web console: %w", err)
	}
	if a.vs != nil {
		if err := a.openShared(a.viewPoll); err != nil {
			return nil, fmt.Errorf("new web console: %w", err)
		}
		return a, nil
	}
	if a.histPath != "" {
		h, recs, err := openHistory(a.histPath, a.histLimit, a.log)
		if err != nil {
			return nil, fmt.Errorf("new web console: %w", err)
		}
		a.restore(recs)
		a.hist = h
	}
	return a, nil
}

// Close writes what the history has queued and closes its file. The console must not be
// used after.
func (a *Adapter) Close() error {
	a.closeShared()
	if a.hist == nil {
		return nil
	}
	if err := a.hist.close(); err != nil {
		return fmt.Errorf("close web console history: %w", err)
	}
	return nil
}

// checkIdentityRules refuses, or warns of, approver rules that a single-identity console
// cannot enforce; addr is where it will listen.
func (a *Adapter) checkIdentityRules(addr string) error {
	rules := needsIdentity(a.policy)
	if a.auth.mode != modeSingle || len(rules) == 0 {
		return nil
	}
	host, _, _ := net.SplitHostPort(addr)
	if !isLoopbackHost(host) {
		return fmt.Errorf("web addr %q is exposed with one shared token, so the console cannot tell people apart, and the bot's %s need it: "+
			"give each person a token in [web.users] (or LOOPBOT_WEB_USERS), or put an authenticating proxy in front (web trusted_proxies)",
			addr, strings.Join(rules, ", "))
	}
	a.warning = "Single-person console: it cannot tell people apart, so " + strings.Join(rules, ", ") + " cannot be enforced here"
	if slices.Contains(rules, "dangerous_needs_other") {
		a.warning += " (a dangerous call cannot be approved from this console)"
	}
	a.warning += ". Configure [web.users] for several people."
	a.log.Warn("web console: approver rules cannot be enforced on a single-person console", "rules", rules, "addr", addr,
		"fix", "configure [web.users] or web trusted_proxies")
	return nil
}

// Name is "web".
func (a *Adapter) Name() string { return PlatformName }

// PacedPerThread tells the bot to pace calls per thread: every console thread lives in one
// channel, and pacing them together would make each wait for all the others.
func (a *Adapter) PacedPerThread() bool { return true }

// Post adds msg to the thread and pushes it to the browsers showing the thread. A thread
// the console does not know (it was forgotten, or the process restarted while the run went
// on) is created.
func (a *Adapter) Post(ctx context.Context, th bot.ThreadRef, msg bot.Message) (bot.MessageRef, error) {
	if err := checkThread(th); err != nil {
		return bot.MessageRef{}, fmt.Errorf("post to web console: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return bot.MessageRef{}, fmt.Errorf("post to web console: %w", err)
	}
	if a.vs != nil {
		return a.postShared(ctx, th, msg)
	}
	defer a.flushHistory()
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.thread(th.Thread, "")
	if msg.Kind == bot.KindAnswer && t.live != "" {
		// The answer takes the place of its live text: the pages drop it as the answer
		// arrives.
		t.live = ""
		a.publishLive(t)
	}
	a.msgs++
	e := a.add(t, &entry{id: fmt.Sprintf("m%s-%d", a.idTag, a.msgs), kind: string(msg.Kind), msg: msg})
	a.touch(t, msg)
	return bot.MessageRef{Thread: th, ID: e.id}, nil
}

// Update replaces a posted message in place and pushes it to the browsers showing the
// thread. A message the console no longer holds is added again at the end, so a long
// run's status card keeps updating.
func (a *Adapter) Update(ctx context.Context, ref bot.MessageRef, msg bot.Message) error {
	if err := checkThread(ref.Thread); err != nil {
		return fmt.Errorf("update web console message: %w", err)
	}
	if ref.ID == "" || len(ref.ID) > 64 {
		return &bot.PermanentError{Err: fmt.Errorf("update web console message: bad message id %q", ref.ID)}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("update web console message: %w", err)
	}
	if a.vs != nil {
		return a.updateShared(ctx, ref, msg)
	}
	defer a.flushHistory()
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.thread(ref.Thread.Thread, "")
	if e := t.entry(ref.ID); e == nil {
		a.add(t, &entry{id: ref.ID, kind: string(msg.Kind), msg: msg})
	} else {
		a.change(t, e, msg)
	}
	a.touch(t, msg)
	return nil
}

// entry is the entry of t with id, or nil.
func (t *thread) entry(id string) *entry {
	for _, e := range t.entries {
		if e.id == id {
			return e
		}
	}
	return nil
}

// change replaces e's message with msg and pushes it; a.mu must be held.
func (a *Adapter) change(t *thread, e *entry, msg bot.Message) {
	a.seq++
	e.seq, e.kind, e.msg = a.seq, string(msg.Kind), msg
	e.render(t)
	a.keep(e.record(t.id, a.now()))
	a.publishEntry(t, e)
}

// keepThread queues t's title and goal for the history file; a.mu must be held.
func (a *Adapter) keepThread(t *thread) {
	a.keep(record{Op: opThread, Thread: t.id, At: t.created, Updated: t.updated, Title: t.title, Mention: t.mention})
}

// keep queues rec for the history file, if the console has one; a.mu must be held.
func (a *Adapter) keep(rec record) {
	if a.hist != nil {
		a.hist.add(rec)
	}
}

// flushHistory writes what the history has queued, and rewrites the file when it has grown
// past its limit. a.mu must not be held.
func (a *Adapter) flushHistory() {
	if a.hist == nil || !a.hist.flush() {
		return
	}
	h := a.hist
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	a.mu.Lock()
	// What is queued is in the view already, so the snapshot holds it.
	h.take()
	snap := a.snapshot()
	a.mu.Unlock()
	h.rewrite(snap)
}

// snapshot is the whole view as history records, threads oldest first, each followed by
// its messages in their order; a.mu must be held.
func (a *Adapter) snapshot() [][]byte {
	list := make([]*thread, 0, len(a.threads))
	for _, t := range a.threads {
		list = append(list, t)
	}
	slices.SortFunc(list, func(x, y *thread) int { return x.created.Compare(y.created) })
	var out [][]byte
	line := func(r record) {
		b, err := json.Marshal(r)
		if err != nil {
			panic(fmt.Sprintf("marshal console history record: %v", err))
		}
		out = append(out, append(b, '\n'))
	}
	for _, t := range list {
		line(record{Op: opThread, Thread: t.id, At: t.created, Updated: t.updated, Title: t.title, Mention: t.mention})
		for _, e := range t.entries {
			line(e.record(t.id, e.sent))
		}
	}
	return out
}

// restore rebuilds the view from the history's records, in their order. It runs in New,
// before anyone can see the console.
func (a *Adapter) restore(recs []record) {
	for _, r := range recs {
		switch r.Op {
		case opThread:
			t := a.thread(r.Thread, r.Title)
			if r.Title != "" {
				t.title = r.Title
			}
			t.created, t.mention = r.At, r.Mention
			t.updated = latest(t.updated, r.At, r.Updated)
		case opGone:
			delete(a.threads, r.Thread)
		case opEntry:
			t := a.thread(r.Thread, "")
			e := t.entry(r.ID)
			if e == nil {
				e = &entry{id: r.ID, sent: r.Sent, event: r.Event}
				a.seq++
				e.pos = a.seq
				t.entries = append(t.entries, e)
				if len(t.entries) > a.cfg.MaxMessages {
					t.entries[0] = nil
					t.entries = t.entries[1:]
				}
			}
			a.seq++
			e.seq, e.kind = a.seq, r.Kind
			if r.Msg != nil {
				e.msg = *r.Msg
				e.kind = string(r.Msg.Kind)
				a.note(t, e.msg)
			} else {
				e.user, e.text = r.User, r.Text
			}
			e.render(t)
			t.updated = latest(t.updated, r.At)
		}
	}
}

// latest is the latest of ts.
func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}

// Notify shows text to one user: every page that user has open gets it. It is not kept; a
// user with no page open does not see it.
func (a *Adapter) Notify(ctx context.Context, th bot.ThreadRef, userID, text string) error {
	if err := checkThread(th); err != nil {
		return fmt.Errorf("notify on web console: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("notify on web console: %w", err)
	}
	ev := newEvent("", "notice", noticeData{Thread: th.Thread, Text: text})
	a.mu.Lock()
	defer a.mu.Unlock()
	// Only the person's own pages get it: s.who is who the stream was authenticated as.
	a.publish(ev, func(s *subscriber) bool { return s.who.name != "" && s.who.id() == userID })
	return nil
}

// checkThread refuses a thread reference that is not the console's: no retry can fix it.
func checkThread(th bot.ThreadRef) error {
	switch {
	case th.Platform != PlatformName:
		return &bot.PermanentError{Err: fmt.Errorf("thread of platform %q", th.Platform)}
	case !validThreadID(th.Thread):
		return &bot.PermanentError{Err: fmt.Errorf("bad thread id %q", th.Thread)}
	}
	return nil
}

// threadRef is the bot's name for a console thread.
func threadRef(id string) bot.ThreadRef {
	return bot.ThreadRef{Platform: PlatformName, Channel: channel, Thread: id}
}

// validThreadID reports whether id could be a thread ID: short, and only letters, digits
// and dashes, so it is safe in a URL and in HTML.
func validThreadID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// thread returns the thread with id, created (and announced) if it does not exist. title is
// its title if it is created; a.mu must be held.
func (a *Adapter) thread(id, title string) *thread {
	if t, ok := a.threads[id]; ok {
		return t
	}
	if len(a.threads) >= a.cfg.MaxThreads {
		a.forgetOldest()
	}
	if title == "" {
		title = defaultTitle(id)
	}
	now := a.now()
	t := &thread{id: id, title: title, created: now, updated: now}
	a.threads[id] = t
	a.keep(record{Op: opThread, Thread: id, At: now, Title: title})
	a.publishSummary(t)
	return t
}

// forgetOldest drops the thread updated longest ago and ends the streams of the pages
// showing it; a.mu must be held.
func (a *Adapter) forgetOldest() {
	var old *thread
	for _, t := range a.threads {
		if old == nil || t.updated.Before(old.updated) {
			old = t
		}
	}
	if old == nil {
		return
	}
	delete(a.threads, old.id)
	a.keep(record{Op: opGone, Thread: old.id, At: a.now()})
	for s := range a.subs {
		if s.thread == old.id {
			a.drop(s)
		}
	}
	a.publish(newEvent("", "thread-gone", threadGone{ID: old.id}), a.viewers(old.id))
}

// add appends e, a new entry, to t and pushes it; a.mu must be held.
func (a *Adapter) add(t *thread, e *entry) *entry {
	a.seq++
	e.pos, e.seq, e.sent = a.seq, a.seq, a.now()
	e.render(t)
	a.keep(e.record(t.id, e.sent))
	t.entries = append(t.entries, e)
	if len(t.entries) > a.cfg.MaxMessages {
		t.entries[0] = nil
		t.entries = t.entries[1:]
	}
	a.publishEntry(t, e)
	return e
}

// touch records that t changed, notes what msg says of it and announces it; a.mu must be
// held.
func (a *Adapter) touch(t *thread, msg bot.Message) {
	t.updated = a.now()
	a.note(t, msg)
	a.publishSummary(t)
}

// note keeps t's status line current and names it by its goal if the console did not see
// the goal; a.mu must be held.
func (a *Adapter) note(t *thread, msg bot.Message) {
	if msg.Kind == bot.KindStatus {
		t.status = text.ClipRunes(firstLine(msg.Text), 80)
		// A thread the console learnt of from the bot alone is named by its goal, which
		// the status card's title is, rather than by its ID.
		if t.title == defaultTitle(t.id) && msg.Title != "" {
			t.title = text.ClipRunes(firstLine(msg.Title), 80)
			a.keepThread(t)
		}
	}
}

// publishSummary announces t, new or changed, to the pages of those who may see it; a.mu
// must be held.
func (a *Adapter) publishSummary(t *thread) {
	a.publish(newEvent("", "thread", t.summary()), a.viewers(t.id))
}

// viewers selects the subscribers whose person may see the thread threadID.
func (a *Adapter) viewers(threadID string) func(*subscriber) bool {
	return func(s *subscriber) bool { return a.mayView(s.who, threadID) }
}

// threadSummary is a thread in the list of threads.
type threadSummary struct {
	ID      string    `json:"id"`
	Title   string    `json:"title"`
	Status  string    `json:"status,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

func (t *thread) summary() threadSummary {
	return threadSummary{ID: t.id, Title: t.title, Status: t.status, Created: t.created, Updated: t.updated}
}

// defaultTitle names a thread whose goal the console has not seen.
func defaultTitle(id string) string { return "Thread " + id }

// randomID returns n random bytes in hex.
func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails, per crypto/rand
	return hex.EncodeToString(b)
}

// firstLine is s up to its first line break, trimmed.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(s)
}

// errNoThread is what a request about a thread the console does not hold gets.
var errNoThread = errors.New("no such thread")
