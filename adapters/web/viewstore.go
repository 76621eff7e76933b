package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// The console's view kept in the bot's store (WithViewStore), for replicas that share it:
// every console then shows the same threads, messages and cards, whichever replica posted
// them, and a person may use any replica's console.
//
// The view is rows, each under a thread and a key: the thread's own (key ""), one per
// message (its ID) and the answer being written (liveKey). Each row is a history record
// (history.go) as JSON. The store numbers rows in the order they commit; a row replaced
// takes the next number and keeps its position, the number of its first put, which orders
// a thread's messages. A console never changes its view directly: it writes the rows, then
// reads what changed since the last number it applied and applies that, as every other
// console does when the store tells it (bot.Notifier, channel bot.ChannelConsole, the
// payload the number written) or at its poll. So the view is the store's on every
// replica, and a browser's Last-Event-ID (the number) means the same on each of them.
//
// A notification carries only a number (PostgreSQL's NOTIFY payload is limited to 8000
// bytes), and one whose number the console has applied already costs no read. A lost one
// loses nothing: the next, or the poll, reads everything past the last number applied.

// ViewStore keeps the console's view as rows (store and store/postgres implement it).
type ViewStore interface {
	// PutConsoleRow stores data under thread and key at the view's next number, which it
	// returns. A row replaced keeps the position of its first put.
	PutConsoleRow(ctx context.Context, thread, key string, data []byte) (uint64, error)
	// DeleteConsoleRows removes the rows of thread with keys, or, when keys is empty,
	// every row of the thread, leaving a tombstone (its row of key "" with nil data) at
	// the number it returns.
	DeleteConsoleRows(ctx context.Context, thread string, keys ...string) (uint64, error)
	// ConsoleRows calls fn for every row written after seq, in the order of their numbers.
	ConsoleRows(ctx context.Context, after uint64, fn func(seq, pos uint64, thread, key string, data []byte) error) error
}

// WithViewStore keeps the console's view in s instead of in this process alone, so that
// every replica's console shows it. If s is a bot.Notifier, a write tells the other
// consoles at once; they also look every DefaultViewPoll. A history file (WithHistory)
// is then imported into s once and renamed with ".imported".
func WithViewStore(s ViewStore) Option { return func(a *Adapter) { a.vs = s } }

// DefaultViewPoll is how often a console on a shared view reads what changed unasked,
// which makes up for a lost notification.
const DefaultViewPoll = 5 * time.Second

// viewTimeout bounds one read or write of the shared view.
const viewTimeout = 10 * time.Second

// liveKey is the row of a thread's answer being written; opLive its record.
const (
	liveKey = "~live"
	opLive  = "live"
)

// shared is the console's side of a shared view: its follower and what it applied.
type shared struct {
	notes bot.Notifier // nil: the store does not notify
	poll  <-chan time.Time
	// ticker makes poll when no poll was given; follow stops it as it ends.
	ticker *time.Ticker
	stop   context.CancelFunc
	done   chan struct{}
	// reads counts the reads of the store, for tests of the notifications.
	reads int64
}

// openShared imports the history file, reads the whole view and starts following it.
func (a *Adapter) openShared(poll <-chan time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), viewTimeout)
	defer cancel()
	if a.histPath != "" {
		if err := a.importHistory(ctx); err != nil {
			return err
		}
	}
	if err := a.catchUp(ctx); err != nil {
		return fmt.Errorf("read the console's view: %w", err)
	}
	n, _ := a.vs.(bot.Notifier)
	fctx, stop := context.WithCancel(context.Background())
	a.sh = &shared{notes: n, poll: poll, stop: stop, done: make(chan struct{})}
	if poll == nil {
		a.sh.ticker = time.NewTicker(DefaultViewPoll)
		a.sh.poll = a.sh.ticker.C
	}
	go a.follow(fctx)
	return nil
}

// importHistory writes the history file's view into the store, once: the file is renamed
// after, so an upgraded single-process console keeps what it showed.
func (a *Adapter) importHistory(ctx context.Context) error {
	recs, err := readHistory(a.histPath, a.log)
	if err != nil {
		return err
	}
	if _, err := os.Stat(a.histPath); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	a.restore(recs)
	list := make([]*thread, 0, len(a.threads))
	for _, t := range a.threads {
		list = append(list, t)
	}
	slices.SortFunc(list, func(x, y *thread) int { return x.created.Compare(y.created) })
	for _, t := range list {
		rec := record{Op: opThread, Thread: t.id, At: t.created, Updated: t.updated, Title: t.title, Mention: t.mention}
		if _, err := a.putRow(ctx, t.id, "", rec); err != nil {
			return fmt.Errorf("import console history: %w", err)
		}
		for _, e := range t.entries {
			if _, err := a.putRow(ctx, t.id, e.id, e.record(t.id, e.sent)); err != nil {
				return fmt.Errorf("import console history: %w", err)
			}
		}
	}
	// The view comes back from the store, numbered as every replica numbers it.
	a.threads, a.seq = map[string]*thread{}, 0
	if err := os.Rename(a.histPath, a.histPath+".imported"); err != nil {
		return fmt.Errorf("import console history: %w", err)
	}
	a.log.Info("web console: imported the history file into the store", "path", a.histPath, "threads", len(list))
	return nil
}

// closeShared stops following the view.
func (a *Adapter) closeShared() {
	if a.sh == nil {
		return
	}
	a.sh.stop()
	<-a.sh.done
}

// follow applies what other consoles wrote, when the store tells of it and at every poll,
// until ctx ends.
func (a *Adapter) follow(ctx context.Context) {
	defer close(a.sh.done)
	if a.sh.ticker != nil {
		defer a.sh.ticker.Stop()
	}
	var notes <-chan bot.Notification
	if a.sh.notes != nil {
		notes = a.sh.notes.Listen(ctx, bot.ChannelConsole)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case n, ok := <-notes:
			if !ok {
				notes = nil
				continue
			}
			// A number applied already needs no read: the notification is of a write
			// this console has seen (its own, most often).
			if seq, err := strconv.ParseUint(n.Payload, 10, 64); err == nil && seq <= a.appliedSeq() {
				continue
			}
		case <-a.sh.poll:
		}
		if err := a.catchUp(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("web console: could not read the console's view from the store; trying again at the next change or poll", "err", err)
		}
	}
}

func (a *Adapter) appliedSeq() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seq
}

// catchUp reads the rows past the last number applied and applies them. Two catch-ups may
// run at once (a write's and the follower's): each applies only rows past the last number
// applied, and each reads every row past its start, so none is lost or applied twice.
func (a *Adapter) catchUp(ctx context.Context) error {
	after := a.appliedSeq()
	a.mu.Lock()
	if a.sh != nil {
		a.sh.reads++
	}
	a.mu.Unlock()
	return a.vs.ConsoleRows(ctx, after, func(seq, pos uint64, thread, key string, data []byte) error {
		a.mu.Lock()
		defer a.mu.Unlock()
		if seq <= a.seq {
			return nil
		}
		a.seq = seq
		a.apply(seq, pos, thread, key, data)
		return nil
	})
}

// apply changes the view by one row and tells the pages; a.mu must be held.
func (a *Adapter) apply(seq, pos uint64, threadID, key string, data []byte) {
	if !validThreadID(threadID) {
		return
	}
	if data == nil {
		if t, ok := a.threads[threadID]; ok {
			a.forget(t)
		}
		return
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		a.log.Warn("web console: skipped a row of the view that does not decode", "thread", threadID, "key", key, "err", err)
		return
	}
	r.Thread = threadID
	switch {
	case key == "" && r.Op == opThread:
		t := a.thread(threadID, r.Title)
		if r.Title != "" {
			t.title = r.Title
		}
		t.created, t.mention = r.At, r.Mention
		t.updated = latest(t.updated, r.At, r.Updated)
		a.publishSummary(t)
	case key == liveKey && r.Op == opLive:
		t, ok := a.threads[threadID]
		if ok && t.live != r.Text {
			t.live = r.Text
			a.publishLive(t)
		}
	case key != "" && r.Op == opEntry && r.ID == key && r.valid():
		t := a.thread(threadID, "")
		e := t.entry(key)
		if e == nil {
			e = &entry{id: key, pos: pos, sent: r.Sent, event: r.Event}
			i, _ := slices.BinarySearchFunc(t.entries, pos, func(x *entry, p uint64) int { return compareUint(x.pos, p) })
			t.entries = slices.Insert(t.entries, i, e)
			if len(t.entries) > a.cfg.MaxMessages {
				t.entries[0] = nil
				t.entries = t.entries[1:]
			}
		}
		e.seq, e.kind = seq, r.Kind
		if r.Msg != nil {
			e.msg, e.kind = *r.Msg, string(r.Msg.Kind)
			a.note(t, e.msg)
			if e.msg.Kind == bot.KindAnswer && t.live != "" {
				// The answer takes the place of its live text.
				t.live = ""
				a.publishLive(t)
			}
		} else {
			e.user, e.text = r.User, r.Text
		}
		e.render(t)
		t.updated = latest(t.updated, r.At)
		if slices.Contains(t.entries, e) {
			a.publishEntry(t, e)
		}
		a.publishSummary(t)
	}
}

// forget drops t from the view and ends the streams of the pages showing it; a.mu must be
// held.
func (a *Adapter) forget(t *thread) {
	delete(a.threads, t.id)
	for s := range a.subs {
		if s.thread == t.id {
			a.drop(s)
		}
	}
	a.publish(newEvent("", "thread-gone", threadGone{ID: t.id}), a.viewers(t.id))
}

// putRow writes rec as the row of thread and key.
func (a *Adapter) putRow(ctx context.Context, thread, key string, rec record) (uint64, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("marshal console row: %w", err)
	}
	return a.vs.PutConsoleRow(ctx, thread, key, data)
}

// viewWrite is one change a console makes to the shared view.
type viewWrite struct {
	thread, key string
	rec         record
	// forget deletes the thread (a tombstone); trim deletes these keys of it.
	forget bool
	trim   []string
}

// write writes the changes in order, tells the other consoles and applies what changed,
// its own changes included, before it returns.
func (a *Adapter) write(ctx context.Context, ws ...viewWrite) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), viewTimeout)
	defer cancel()
	var last uint64
	for _, w := range ws {
		var (
			seq uint64
			err error
		)
		switch {
		case w.forget:
			seq, err = a.vs.DeleteConsoleRows(ctx, w.thread)
		case len(w.trim) > 0:
			_, err = a.vs.DeleteConsoleRows(ctx, w.thread, w.trim...)
		default:
			seq, err = a.putRow(ctx, w.thread, w.key, w.rec)
		}
		if err != nil {
			return fmt.Errorf("write the console's view: %w", err)
		}
		last = max(last, seq)
	}
	if a.sh != nil && a.sh.notes != nil && last > 0 {
		if err := a.sh.notes.Notify(ctx, bot.ChannelConsole, strconv.FormatUint(last, 10)); err != nil {
			a.log.Warn("web console: could not tell the other consoles of a change; they find it at their next poll", "err", err)
		}
	}
	if err := a.catchUp(ctx); err != nil {
		return fmt.Errorf("read the console's view: %w", err)
	}
	return nil
}

// threadWrites are the writes that make thread id exist in the shared view, if it does not:
// its row, and the forgetting of the oldest thread when the view is full. a.mu must be held.
func (a *Adapter) threadWrites(id, title, mention string) []viewWrite {
	if _, ok := a.threads[id]; ok {
		return nil
	}
	var ws []viewWrite
	if len(a.threads) >= a.cfg.MaxThreads {
		var old *thread
		for _, t := range a.threads {
			if old == nil || t.updated.Before(old.updated) {
				old = t
			}
		}
		if old != nil {
			ws = append(ws, viewWrite{thread: old.id, forget: true})
		}
	}
	if title == "" {
		title = defaultTitle(id)
	}
	now := a.now()
	return append(ws, viewWrite{thread: id, rec: record{Op: opThread, Thread: id, At: now, Updated: now, Title: title, Mention: mention}})
}

// entryWrites are the writes that add or change a message of thread id: its row, and the
// deletion of the messages that fall off the thread when it is full. a.mu must be held.
func (a *Adapter) entryWrites(id string, rec record) []viewWrite {
	ws := []viewWrite{{thread: id, key: rec.ID, rec: rec}}
	if t, ok := a.threads[id]; ok && t.entry(rec.ID) == nil && len(t.entries) >= a.cfg.MaxMessages {
		var trim []string
		for _, e := range t.entries[:len(t.entries)-a.cfg.MaxMessages+1] {
			trim = append(trim, e.id)
		}
		ws = append(ws, viewWrite{thread: id, trim: trim})
	}
	return ws
}
