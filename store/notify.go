package store

import (
	"context"
	"slices"
	"sync"

	"github.com/loopbot/loopbot/bot"
)

// listenQueue is how many notifications a listener may have waiting; more are dropped, as
// a Notifier may: the listener's polling finds what they announced.
const listenQueue = 64

// notices delivers notifications among the bots that share this handle, in the process:
// one process holds a bbolt file, so there is nobody else to tell.
type notices struct {
	mu   sync.Mutex
	subs map[*listener]bool
}

type listener struct {
	channels []string
	out      chan bot.Notification
}

var _ bot.Notifier = (*DB)(nil)

// Notify sends payload on channel to the handle's listeners. It never blocks: a listener
// whose queue is full misses it.
func (db *DB) Notify(ctx context.Context, channel, payload string) error {
	db.notes.mu.Lock()
	defer db.notes.mu.Unlock()
	for l := range db.notes.subs {
		if slices.Contains(l.channels, channel) {
			select {
			case l.out <- bot.Notification{Channel: channel, Payload: payload}:
			default:
			}
		}
	}
	return nil
}

// Listen returns the notifications on channels until ctx ends. The first is an empty one on
// each channel, as Notifier asks of a new listener.
func (db *DB) Listen(ctx context.Context, channels ...string) <-chan bot.Notification {
	l := &listener{channels: slices.Clone(channels), out: make(chan bot.Notification, max(listenQueue, len(channels)))}
	for _, c := range channels {
		l.out <- bot.Notification{Channel: c}
	}
	db.notes.mu.Lock()
	if db.notes.subs == nil {
		db.notes.subs = map[*listener]bool{}
	}
	db.notes.subs[l] = true
	db.notes.mu.Unlock()
	go func() {
		<-ctx.Done()
		db.notes.mu.Lock()
		delete(db.notes.subs, l)
		close(l.out)
		db.notes.mu.Unlock()
	}()
	return l.out
}
