package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Server-sent events. One stream per open page: GET /api/events?thread=ID. The person is
// the one the request was authenticated as; a user parameter, which pages once sent, is
// ignored. It starts with the list of threads the person may see and, for a thread they
// may see, its messages: those changed since the
// Last-Event-ID the browser sends when it reconnects, or all of them after a "reset" event
// when there is no usable ID. Then come the changes as they happen:
//
//	event: message      id: EPOCH-SEQ  data: {"thread","id","pos","kind","html"}
//	event: thread       (no id)        data: a thread summary, new or changed
//	event: thread-gone  (no id)        data: {"id"} of a forgotten thread
//	event: notice       (no id)        data: {"thread","text"} for this user only
//	event: stream       (no id)        data: {"thread","html"} the answer as it is written (stream.go)
//	event: sync         id: EPOCH-SEQ  data: {} (the initial state is complete)
//
// Only message and sync events carry IDs, and their sequence numbers only grow, so the ID
// the browser holds is the latest change it has seen.

// keepAlive is how often an idle stream gets a comment, so proxies and the browser keep it.
const keepAlive = 25 * time.Second

// writeTimeout bounds one write to a stream; a browser that stops reading is cut off.
const writeTimeout = 10 * time.Second

// event is one server-sent event, ready to write.
type event struct {
	id   string
	name string
	data []byte
}

// subscriber is one open stream.
type subscriber struct {
	thread string   // the thread the page shows, or ""
	who    identity // who the stream was authenticated as: what it may see, whose notices
	ch     chan event
}

type messageData struct {
	Thread string `json:"thread"`
	ID     string `json:"id"`
	Pos    uint64 `json:"pos"`
	Kind   string `json:"kind"`
	HTML   string `json:"html"`
}

type noticeData struct {
	Thread string `json:"thread"`
	Text   string `json:"text"`
}

type threadGone struct {
	ID string `json:"id"`
}

func newEvent(id, name string, v any) event {
	data, err := json.Marshal(v)
	if err != nil {
		// Every value passed here is a plain struct of strings and numbers.
		panic(fmt.Sprintf("marshal %s event: %v", name, err))
	}
	return event{id: id, name: name, data: data}
}

// eventID is the ID of the change with sequence number seq.
func (a *Adapter) eventID(seq uint64) string { return a.epoch + "-" + strconv.FormatUint(seq, 10) }

// messageEvent is the event that shows e as it is now.
func (a *Adapter) messageEvent(t *thread, e *entry) event {
	return newEvent(a.eventID(e.seq), "message", messageData{Thread: t.id, ID: e.id, Pos: e.pos, Kind: e.kind, HTML: e.html})
}

// publishEntry pushes e to the pages showing t; a.mu must be held.
func (a *Adapter) publishEntry(t *thread, e *entry) {
	a.publish(a.messageEvent(t, e), func(s *subscriber) bool { return s.thread == t.id })
}

// publish offers ev to every subscriber that match selects, without ever waiting: a
// subscriber whose buffer is full is dropped, its stream ends, and the browser reconnects
// and resyncs. a.mu must be held, which keeps the events in the order of the changes.
func (a *Adapter) publish(ev event, match func(*subscriber) bool) {
	for s := range a.subs {
		if !match(s) {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			a.drop(s)
		}
	}
}

// drop ends a subscription; a.mu must be held.
func (a *Adapter) drop(s *subscriber) {
	if _, ok := a.subs[s]; ok {
		delete(a.subs, s)
		close(s.ch)
	}
}

// subscribe opens a subscription and returns it with the events that bring the page up to
// date. lastID is the browser's Last-Event-ID header, "" on a first connection.
func (a *Adapter) subscribe(threadID string, who identity, lastID string) (*subscriber, []event, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, nil, errClosed
	}
	var t *thread
	if threadID != "" {
		var ok bool
		if t, ok = a.visible(who, threadID); !ok {
			return nil, nil, errNoThread
		}
	}
	init := []event{newEvent("", "threads", a.summaries(who))}
	if t != nil {
		since, ok := a.parseEventID(lastID)
		if !ok {
			init = append(init, newEvent("", "reset", struct{}{}))
		}
		changed := make([]*entry, 0, len(t.entries))
		for _, e := range t.entries {
			if e.seq > since {
				changed = append(changed, e)
			}
		}
		slices.SortFunc(changed, func(x, y *entry) int { return compareUint(x.seq, y.seq) })
		for _, e := range changed {
			init = append(init, a.messageEvent(t, e))
		}
		if t.live != "" {
			init = append(init, a.liveEvent(t))
		}
	}
	init = append(init, newEvent(a.eventID(a.seq), "sync", struct{}{}))
	s := &subscriber{thread: threadID, who: who, ch: make(chan event, a.buffer)}
	a.subs[s] = struct{}{}
	return s, init, nil
}

// parseEventID returns the sequence number of an event ID of this process. An ID of
// another process, or from the future, is not usable: the page needs a full snapshot.
func (a *Adapter) parseEventID(id string) (uint64, bool) {
	epoch, seq, ok := strings.Cut(id, "-")
	if !ok || epoch != a.epoch {
		return 0, false
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil || n > a.seq {
		return 0, false
	}
	return n, true
}

func (a *Adapter) unsubscribe(s *subscriber) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.drop(s)
}

// closeStreams ends every stream and refuses new ones, so a server shutting down is not
// kept waiting by pages that never finish loading.
func (a *Adapter) closeStreams() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for s := range a.subs {
		a.drop(s)
	}
}

// subscribers counts the open streams.
func (a *Adapter) subscribers() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.subs)
}

func compareUint(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// writeEvent writes ev in the text/event-stream format. The data is one line of JSON, so
// it needs no splitting.
func writeEvent(w http.ResponseWriter, ev event) error {
	var b strings.Builder
	if ev.id != "" {
		b.WriteString("id: " + ev.id + "\n")
	}
	b.WriteString("event: " + ev.name + "\ndata: ")
	b.Write(ev.data)
	b.WriteString("\n\n")
	_, err := w.Write([]byte(b.String()))
	return err
}

// serveEvents is GET /api/events.
func (a *Adapter) serveEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	threadID := q.Get("thread")
	if threadID != "" && !validThreadID(threadID) {
		writeError(w, http.StatusBadRequest, "thread: not a thread id")
		return
	}
	who, _ := requestIdentity(r)
	s, init, err := a.subscribe(threadID, who, r.Header.Get("Last-Event-ID"))
	switch err {
	case nil:
	case errNoThread:
		writeError(w, http.StatusNotFound, "no thread "+threadID+": it was never opened here or has been forgotten")
		return
	default:
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	defer a.unsubscribe(s)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(evs ...event) bool {
		// A stream without deadline support is still served; it just cannot be cut off.
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		for _, ev := range evs {
			if err := writeEvent(w, ev); err != nil {
				return false
			}
		}
		return rc.Flush() == nil
	}
	if _, err := w.Write([]byte("retry: 2000\n\n")); err != nil || !send(init...) {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-s.ch:
			if !ok {
				return
			}
			evs := []event{ev}
			// Send what else is waiting in one write.
			for more := true; more && len(evs) < 64; {
				select {
				case ev, ok := <-s.ch:
					if !ok {
						send(evs...)
						return
					}
					evs = append(evs, ev)
				default:
					more = false
				}
			}
			if !send(evs...) {
				return
			}
		case <-tick.C:
			_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}
