package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
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
	index *template.Template
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
}

// entry is one message of a thread, as last rendered.
type entry struct {
	id   string
	pos  uint64 // the sequence number it was created at: its place in the thread
	seq  uint64 // the sequence number of its last change
	kind string // a bot.MessageKind, or "user" for what a person typed
	html string
	// event is the delivery that added a person's message, so a double submit adds it once.
	event string
}

// Option configures an Adapter.
type Option func(*Adapter)

// WithClock sets the clock of thread timestamps.
func WithClock(now func() time.Time) Option { return func(a *Adapter) { a.now = now } }

// WithLogger sets the logger for what the console's users are not shown.
func WithLogger(l *slog.Logger) Option { return func(a *Adapter) { a.log = l } }

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
	index, err := template.ParseFS(static, "static/index.html")
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
	a.seeAll = slices.Clone(a.policy.Approvers)
	for _, v := range cfg.Viewers {
		a.seeAll = append(a.seeAll, userPrefix+v)
	}
	if err := a.checkIdentityRules(cfg.Addr); err != nil {
		return nil, fmt.Errorf("new web console: %w", err)
	}
	return a, nil
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
	html := renderMessage(msg)
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.thread(th.Thread, "")
	a.msgs++
	e := a.add(t, fmt.Sprintf("m%s-%d", a.epoch, a.msgs), string(msg.Kind), html, "")
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
	html := renderMessage(msg)
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.thread(ref.Thread.Thread, "")
	var e *entry
	for _, x := range t.entries {
		if x.id == ref.ID {
			e = x
			break
		}
	}
	if e == nil {
		a.add(t, ref.ID, string(msg.Kind), html, "")
	} else {
		a.seq++
		e.seq, e.kind, e.html = a.seq, string(msg.Kind), html
		a.publishEntry(t, e)
	}
	a.touch(t, msg)
	return nil
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
		title = "Thread " + id
	}
	now := a.now()
	t := &thread{id: id, title: title, created: now, updated: now}
	a.threads[id] = t
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
	for s := range a.subs {
		if s.thread == old.id {
			a.drop(s)
		}
	}
	a.publish(newEvent("", "thread-gone", threadGone{ID: old.id}), a.viewers(old.id))
}

// add appends a new entry to t and pushes it; a.mu must be held.
func (a *Adapter) add(t *thread, id, kind, html, event string) *entry {
	a.seq++
	e := &entry{id: id, pos: a.seq, seq: a.seq, kind: kind, html: html, event: event}
	t.entries = append(t.entries, e)
	if len(t.entries) > a.cfg.MaxMessages {
		t.entries[0] = nil
		t.entries = t.entries[1:]
	}
	a.publishEntry(t, e)
	return e
}

// touch records that t changed, keeps its status line current and announces it; a.mu
// must be held.
func (a *Adapter) touch(t *thread, msg bot.Message) {
	t.updated = a.now()
	if msg.Kind == bot.KindStatus {
		t.status = text.ClipRunes(firstLine(msg.Text), 80)
	}
	a.publishSummary(t)
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
