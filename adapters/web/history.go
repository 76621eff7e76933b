package web

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// The console's history is a log of its own view, kept in a file next to the bot's
// database (WithHistory), so that after a restart every thread comes back as it was: its
// title, its messages in their order, the goal that opened it and every card as last
// rendered, decided ones as decided. The runs themselves are the bot's and durable in its
// store; the adapter does not read that store (only cmd and store import it), and the bot
// keeps no record of what a platform showed, so the view is the adapter's to keep.
//
// Given a ViewStore (viewstore.go), the console keeps its view there instead, as rows that
// are these records, and imports a history file it finds once.
//
// The file is JSON lines, one record a change, appended in the order of the changes. It is
// rewritten from the console's memory, which MaxThreads and MaxMessages bound, when it grows
// past its limit, so it never holds much more than the view itself.

// DefaultHistoryBytes is the size past which the history file is rewritten to what the
// console holds.
const DefaultHistoryBytes = 8 << 20

// maxHistoryLine bounds one record when reading the file back: a message is at most a few
// tens of kilobytes, so anything longer is damage.
const maxHistoryLine = 4 << 20

// Record operations.
const (
	opThread = "thread" // a thread was opened
	opEntry  = "entry"  // a message was added or changed
	opGone   = "gone"   // a thread was forgotten
)

// record is one line of the history file.
type record struct {
	Op     string    `json:"op"`
	Thread string    `json:"thread"`
	At     time.Time `json:"at"`
	// A thread's: At is when it was opened.
	Updated time.Time `json:"updated,omitzero"`
	Title   string    `json:"title,omitempty"`
	Mention string    `json:"mention,omitempty"`
	// An entry's: At is when it changed, Sent when it was first posted.
	Sent  time.Time    `json:"sent,omitzero"`
	ID    string       `json:"id,omitempty"`
	Kind  string       `json:"kind,omitempty"`
	Msg   *bot.Message `json:"msg,omitempty"`
	User  string       `json:"user,omitempty"` // the author of a person's message
	Text  string       `json:"text,omitempty"` // what they wrote
	Event string       `json:"event,omitempty"`
}

// history appends the console's changes to its file. Records are queued in the order of the
// changes while the adapter's lock is held (no I/O there) and written by flush after it is
// released; writeMu keeps the writes, and so the file, in the queue's order.
type history struct {
	path  string
	limit int64
	log   *slog.Logger

	// writeMu is held while the file is written. It is taken before the adapter's lock
	// when both are needed (compaction), never while that lock is held.
	writeMu sync.Mutex
	f       *os.File
	size    int64
	// next is the size at which the file is rewritten: the limit, or twice what the last
	// rewrite left if the view itself is larger.
	next int64
	// failed is set after a write error is logged, so a full disk logs once.
	failed bool

	mu    sync.Mutex // guards queue
	queue [][]byte
}

// openHistory opens (creating it if need be) the history file at path and reads its records.
func openHistory(path string, limit int64, log *slog.Logger) (*history, []record, error) {
	if limit <= 0 {
		limit = DefaultHistoryBytes
	}
	recs, err := readHistory(path, log)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open console history: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("open console history: %w", err)
	}
	return &history{path: path, limit: limit, next: limit, log: log, f: f, size: st.Size()}, recs, nil
}

// readHistory reads the records of the file at path; a file that does not exist has none.
// A line that does not decode (the last one, cut by a crash, say) is skipped and logged:
// losing one line of the view is better than losing the console.
func readHistory(path string, log *slog.Logger) ([]record, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read console history: %w", err)
	}
	defer f.Close()
	recs, bad, err := decodeHistory(f)
	if err != nil {
		return nil, fmt.Errorf("read console history %s: %w", path, err)
	}
	if bad > 0 {
		log.Warn("web console: skipped damaged lines of the history file", "path", path, "lines", bad)
	}
	return recs, nil
}

// decodeHistory reads JSON-lines records from r and counts the lines it could not use.
func decodeHistory(r io.Reader) ([]record, int, error) {
	var (
		recs []record
		bad  int
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxHistoryLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var rec record
		if err := json.Unmarshal(line, &rec); err != nil || !rec.valid() {
			bad++
			continue
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	return recs, bad, nil
}

// valid reports whether rec can be applied: the IDs it carries are ones the console makes.
func (r record) valid() bool {
	if !validThreadID(r.Thread) {
		return false
	}
	switch r.Op {
	case opThread, opGone:
		return true
	case opEntry:
		return r.ID != "" && len(r.ID) <= 64 && (r.Msg != nil || r.Kind == kindUser)
	}
	return false
}

// add queues rec; the caller holds the adapter's lock, which orders the queue.
func (h *history) add(rec record) {
	line, err := json.Marshal(rec)
	if err != nil {
		// A record is strings, numbers, times and a bot.Message: it always marshals.
		panic(fmt.Sprintf("marshal console history record: %v", err))
	}
	h.mu.Lock()
	h.queue = append(h.queue, append(line, '\n'))
	h.mu.Unlock()
}

// take empties the queue and returns what was in it.
func (h *history) take() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queue
	h.queue = nil
	return q
}

// flush writes the queued records. It reports whether the file has grown past its limit
// and should be rewritten. The caller must not hold the adapter's lock.
func (h *history) flush() (full bool) {
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	q := h.take()
	if len(q) == 0 || h.f == nil {
		return false
	}
	n, err := h.f.Write(bytes.Join(q, nil))
	h.size += int64(n)
	h.report(err)
	return h.size > h.next
}

// report logs a write error once until writes work again. The console goes on from memory:
// what it shows is right, only a restart would lose it.
func (h *history) report(err error) {
	switch {
	case err == nil:
		h.failed = false
	case !h.failed:
		h.failed = true
		h.log.Error("web console: could not write the history file; the console's view will not survive a restart", "path", h.path, "err", err)
	}
}

// rewrite replaces the file with snapshot, the records of the whole view. writeMu must be
// held; snapshot must have been taken, and the queue emptied, under the adapter's lock
// while writeMu was held, so that nothing queued is lost or written twice.
func (h *history) rewrite(snapshot [][]byte) {
	data := bytes.Join(snapshot, nil)
	tmp := h.path + ".tmp"
	err := os.WriteFile(tmp, data, 0o600)
	if err == nil {
		err = os.Rename(tmp, h.path)
	}
	if err != nil {
		os.Remove(tmp)
		h.log.Error("web console: could not rewrite the history file; it keeps growing", "path", h.path, "err", err)
		// Try again only once it has grown as much again.
		h.next = h.size * 2
		return
	}
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		h.f.Close()
		h.f = nil
		h.log.Error("web console: could not reopen the history file; the console's view will not survive a restart", "path", h.path, "err", err)
		return
	}
	h.f.Close()
	h.f, h.size = f, int64(len(data))
	h.next = max(h.limit, 2*h.size)
	h.log.Debug("web console: rewrote the history file", "path", filepath.Base(h.path), "bytes", h.size)
}

// close closes the file after writing what is queued.
func (h *history) close() error {
	h.flush()
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	if h.f == nil {
		return nil
	}
	err := h.f.Close()
	h.f = nil
	return err
}
