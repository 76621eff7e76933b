// Package storetest is the conformance suite of bot.Store: every backend runs it, so the
// bot can rely on the same behaviour from each.
//
// A backend's test calls Run with a function that opens a new, empty store for one subtest:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) bot.Store {
//			s := open(t) // closed, and checked where the backend can, in t.Cleanup
//			return s
//		}, storetest.WithReopen(reopen))
//
// The suite covers round trips of every record type (a run carries a real agent.State),
// ErrNotFound, run listing (Runs and RunIDs) in creation order with its filters, listing by
// status as runs change status, run headers, the listing a restarted bot recovers from, outbox replacement by key, one rating per person per answer, audit order, read-only views, cancelled
// contexts, rollback on error and on panic, compare-and-set races on approvals and
// conversations (and on creating a record that does not exist yet), lost updates, and event dedupe (twenty deliveries at once among them) and purge on an injected clock. Subtests
// that need a restart are skipped unless the backend gives WithReopen.
//
// Both backends also implement bot.Leaser, and the suite checks run claims (oldest first,
// paused and finished runs never), fencing (a superseded or released lease's checkpoint is
// refused with a *bot.FencedError, an older epoch of the same replica included), lease expiry
// and renewal on the injected clock, and claims from eight claimers at once, each run
// claimed exactly once. A backend that can open a second handle on one database
// (WithSecondHandle) runs those claims across both handles and a decision raced from both;
// one that cannot says why (WithoutSecondHandle) and that subtest skips. BenchCheckpoint
// measures a checkpoint of a 50 KB run, plain and fenced.
//
// Beyond what bot.Tx documents, the suite expects approvals and outbox items to list oldest
// first (by CreatedAt), runs to keep their place in the creation order when put again, and
// RunFilter.Limit to keep the first matches in that order.
//
// # Caveats
//
// The race subtests run twenty goroutines against one store: a backend must be safe for
// concurrent use, and they are only meaningful under -race. Nothing in the suite sleeps or
// reads the wall clock, so a backend must take every time from its parameters.
package storetest
