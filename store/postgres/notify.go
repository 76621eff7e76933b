package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loopbot/loopbot/bot"
)

// listenQueue is how many notifications a listener may have waiting; more are dropped, as
// a Notifier may: the listener's polling finds what they announced.
const listenQueue = 64

// listenRetry bounds the wait before a listener whose connection failed connects again;
// the wait doubles from a tenth of a second up to it.
const listenRetry = 5 * time.Second

var _ bot.Notifier = (*DB)(nil)

// Notify sends payload on channel to every session listening on the database (pg_notify):
// every replica's listener, this one's included.
func (db *DB) Notify(ctx context.Context, channel, payload string) error {
	if _, err := db.pool.Exec(ctx, "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}

// Listen returns the notifications on channels until ctx ends. It listens on a connection
// of its own, taken out of the pool (LISTEN holds a session), and connects again whenever
// that connection fails, as it does when the server restarts; each time it has connected,
// it delivers an empty notification on each channel, since those sent meanwhile are lost.
func (db *DB) Listen(ctx context.Context, channels ...string) <-chan bot.Notification {
	out := make(chan bot.Notification, max(listenQueue, len(channels)))
	channels = slices.Clone(channels)
	go func() {
		defer close(out)
		wait := 100 * time.Millisecond
		for {
			// Why a connection failed is not told: the store has no log, and the bot
			// polls meanwhile; a failure that lasts shows in its writes too.
			connected := db.listen(ctx, channels, out)
			if ctx.Err() != nil {
				return
			}
			if connected {
				wait = 100 * time.Millisecond
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, listenRetry)
		}
	}()
	return out
}

// listen listens on one connection until it fails or ctx ends, and reports whether it got
// as far as listening.
func (db *DB) listen(ctx context.Context, channels []string, out chan<- bot.Notification) bool {
	pc, err := db.pool.Acquire(ctx)
	if err != nil {
		return false
	}
	// Hijacked, the connection is this listener's alone and never goes back to the pool
	// with its LISTENs on.
	conn := pc.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	for _, c := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{c}.Sanitize()); err != nil {
			return false
		}
	}
	for _, c := range channels {
		deliver(out, bot.Notification{Channel: c})
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		deliver(out, bot.Notification{Channel: n.Channel, Payload: n.Payload})
	}
}

// deliver queues n unless the listener's queue is full.
func deliver(out chan<- bot.Notification, n bot.Notification) {
	select {
	case out <- n:
	default:
	}
}
