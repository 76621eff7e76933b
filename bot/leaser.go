package bot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// Leaser hands runs to replicas that share one store: a replica claims runnable runs a few
// at a time, holds each under a lease it renews, and writes a run's checkpoints fenced by
// the lease, so that a replica that paused or lost its network and was taken over cannot
// overwrite what the new owner wrote. Both store backends implement it; on bbolt, one
// process holds the file, and the leases are as correct there, if never contended.
//
// Every time comes from the caller's clock (now), as with event claims: tests inject it, and
// replicas' clocks must agree to within a small part of the lease's time to live.
type Leaser interface {
	// ClaimRuns leases to owner up to n runs in a runnable status (RunnableStatuses) that
	// hold no live lease, oldest first, until now+ttl. Each claim takes the run's next
	// epoch: a run whose lease expired is taken over, and its old owner fenced. Runs that
	// another claim is taking at the same moment are skipped, not waited for.
	ClaimRuns(ctx context.Context, owner string, n int, now time.Time, ttl time.Duration) ([]Lease, error)
	// RenewLease extends l until now+ttl if its owner still holds it at its epoch, and
	// returns the renewed lease; else a *FencedError. A lease that expired with nobody
	// taking the run over is still held: it renews.
	RenewLease(ctx context.Context, l Lease, now time.Time, ttl time.Duration) (Lease, error)
	// ReleaseLease gives the run up (it paused or ended, or the replica stops), keeping
	// its epoch, so the next claim takes the one after. A lease already superseded is a
	// *FencedError.
	ReleaseLease(ctx context.Context, l Lease) error
	// Lease returns the run's lease as stored (released or expired ones too), or an error
	// wrapping ErrNotFound for a run never claimed.
	Lease(ctx context.Context, runID string) (Lease, error)
	// UpdateFenced is Store.Update for the owner of l: fn runs only while l is the run's
	// current lease, checked in the same transaction, with the lease's row locked until it
	// ends. A lease superseded by a later epoch, or released, fails with a *FencedError
	// and fn does not run. The lease's expiry is not checked: an expired lease nobody took
	// over still fences nobody out, and the epoch alone says who may write.
	UpdateFenced(ctx context.Context, l Lease, fn func(tx Tx) error) error
}

// RunnableStatuses are the statuses of runs a replica works on, and so claims. A paused run
// (awaiting approval or input) holds no lease.
var RunnableStatuses = []agent.Status{agent.StatusQueued, agent.StatusRunning}

// Lease is a replica's ownership of one run. Epoch grows by one with every claim of the
// run, so a later owner's epoch is always higher.
type Lease struct {
	RunID   string    `json:"run_id"`
	Owner   string    `json:"owner"` // the replica's ID; "" once released
	Epoch   int64     `json:"epoch"`
	Expires time.Time `json:"expires"`
}

// Live reports whether the lease is held at now: it has an owner and has not expired.
func (l Lease) Live(now time.Time) bool { return l.Owner != "" && now.Before(l.Expires) }

// ErrFenced is what a *FencedError is: a write or renewal under a lease that is no longer
// the run's.
var ErrFenced = errors.New("run lease superseded")

// FencedError refuses a write under a lease that is no longer current: the run was taken
// over (Current.Epoch is higher) or released.
type FencedError struct {
	Held    Lease // the lease the caller wrote under
	Current Lease // the lease stored
}

func (e *FencedError) Error() string {
	if e.Current.Owner == "" {
		return fmt.Sprintf("run %s: lease of %s at epoch %d was released (now epoch %d)", e.Held.RunID, e.Held.Owner, e.Held.Epoch, e.Current.Epoch)
	}
	return fmt.Sprintf("run %s: lease of %s at epoch %d superseded by %s at epoch %d", e.Held.RunID, e.Held.Owner, e.Held.Epoch, e.Current.Owner, e.Current.Epoch)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// CheckLease compares the lease a writer holds with the one stored: nil if they are the
// same owner at the same epoch, else a *FencedError. Backends call it inside the
// transaction that writes.
func CheckLease(held, stored Lease) error {
	if stored.Owner == "" || stored.Owner != held.Owner || stored.Epoch != held.Epoch {
		return &FencedError{Held: held, Current: stored}
	}
	return nil
}

// CheckClaim checks the arguments of ClaimRuns and RenewLease.
func CheckClaim(owner string, n int, ttl time.Duration) error {
	switch {
	case owner == "":
		return errors.New("no owner")
	case n < 1:
		return fmt.Errorf("claim of %d runs", n)
	case ttl <= 0:
		return fmt.Errorf("lease ttl must be positive, got %s", ttl)
	}
	return nil
}

// LeaseTaker is a Tx that leases a run to a replica inside the transaction: the replica that
// creates a run takes its lease in the transaction that creates it and starts the run as
// that commits, with no claim of its own (handoff.go). Both store backends implement it.
type LeaseTaker interface {
	// TakeLease leases run runID to owner until now+ttl at the run's next epoch, unless
	// its lease is live; taken is false then, and nothing is written. Whether the run may
	// be worked (its status) is the caller's to know.
	TakeLease(runID, owner string, now time.Time, ttl time.Duration) (l Lease, taken bool, err error)
}
