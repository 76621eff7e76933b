package storetest

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// Replicated is a store that replicas share: it hands out run leases, elects leaders,
// notifies and keeps the outbox's holds.
type Replicated interface {
	bot.Store
	bot.Leaser
	bot.Elector
	bot.Notifier
	bot.HoldStore
}

// ErrCut is what a replica cut off by Cut hears.
var ErrCut = errors.New("connection refused")

// Cut is one replica's way to a Replicated store that a test can cut for claims, renewals
// and elections, as a replica that is paused (SIGSTOP) or partitioned stops renewing. Its
// other writes, fenced checkpoints among them, still arrive, as a paused replica's late
// write does once it wakes.
type Cut struct {
	Replicated
	cut  atomic.Bool
	lose atomic.Bool
}

// Set cuts the replica off (true) or reconnects it.
func (c *Cut) Set(cut bool) { c.cut.Store(cut) }

// Lose makes the notifications the replica sends get lost (true), as a Notifier may lose
// them, so that a test sees the polling make up for them.
func (c *Cut) Lose(lose bool) { c.lose.Store(lose) }

func (c *Cut) Notify(ctx context.Context, channel, payload string) error {
	if c.lose.Load() {
		return nil
	}
	return c.Replicated.Notify(ctx, channel, payload)
}

func (c *Cut) ClaimRuns(ctx context.Context, owner string, n int, now time.Time, ttl time.Duration) ([]bot.Lease, error) {
	if c.cut.Load() {
		return nil, ErrCut
	}
	return c.Replicated.ClaimRuns(ctx, owner, n, now, ttl)
}

func (c *Cut) RenewLease(ctx context.Context, l bot.Lease, now time.Time, ttl time.Duration) (bot.Lease, error) {
	if c.cut.Load() {
		return bot.Lease{}, ErrCut
	}
	return c.Replicated.RenewLease(ctx, l, now, ttl)
}

func (c *Cut) Lead(ctx context.Context, role, owner string, now time.Time, ttl time.Duration) (bot.Leadership, error) {
	if c.cut.Load() {
		return bot.Leadership{}, ErrCut
	}
	return c.Replicated.Lead(ctx, role, owner, now, ttl)
}
