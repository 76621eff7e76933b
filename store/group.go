package store

import (
	"context"
	"fmt"
	"runtime/trace"
	"slices"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// Group commit.
//
// Every write transaction ends in a disk sync, and bbolt lets one writer in at a time, so
// runs that checkpoint at the same moment queue behind each other's syncs: a thousand runs
// stepping together would spend about a second in syncs at every step. So writes that arrive
// while another is being committed wait together, and the first of them to be let in (the
// leader) runs all their functions in one transaction with one sync. A write that finds no
// commit under way goes alone at once: a lone writer waits for nobody, and a write waits only
// for the commits of the writes queued before it, up to maxGroup of them at a time.
//
// The functions of a group run one after another in the order they arrived, each seeing
// what the ones before it wrote, so a group is the same as running them one by one: a
// read, check and write inside a function is still a compare-and-set. A function that
// fails without having written anything just returns its error; one that fails after
// writing (or panics) spoils the transaction, which is rolled back: that function runs
// again in a transaction of its own, in its caller's goroutine, which is where its error
// (or panic) comes from, and the rest run again without it. So a function may run more
// than once, as with bbolt's Batch; bot.Store asks that of every caller.

// maxGroup bounds the functions of one transaction, so that one commit stays short enough
// for the writers queued behind it.
const maxGroup = 256

// write is one caller's function waiting for its transaction.
type write struct {
	// gone is the Done channel of the caller's context: a writer whose caller has given
	// up by its turn is not run, and the caller returns its context's error.
	gone <-chan struct{}
	fn   func(t *tx) error
	done chan outcome // one at a time: the turn to lead, then the result
	err  error        // what fn returned in the group's latest try
	skip bool         // gone by its turn in the group's latest try
}

// outcome is what a waiting writer is told.
type outcome struct {
	lead bool  // take the queue and commit it
	solo bool  // run fn again alone: it spoiled the group's transaction
	gone bool  // not run: the caller's context ended first
	err  error // the result, when none of the above
}

// update runs fn in a write transaction, in a group with the writes that queue up meanwhile.
func (db *DB) update(ctx context.Context, fn func(t *tx) error) error {
	return db.enqueue(ctx, fn, false)
}

// updateFirst is update for a write someone waits on at once (the intake of events a
// platform waits to see acknowledged): it goes into the next transaction ahead of the
// writes already waiting, behind only the commit under way and the other such writes.
func (db *DB) updateFirst(ctx context.Context, fn func(t *tx) error) error {
	return db.enqueue(ctx, fn, true)
}

func (db *DB) enqueue(ctx context.Context, fn func(t *tx) error, first bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	defer trace.StartRegion(ctx, "store: write").End()
	db.writes.Add(1)
	w := &write{gone: ctx.Done(), fn: fn, done: make(chan outcome, 1)}
	db.wmu.Lock()
	if first {
		db.firsts = append(db.firsts, w)
	} else {
		db.queue = append(db.queue, w)
	}
	lead := !db.writing
	db.writing = true
	db.wmu.Unlock()
	if !lead {
		o := <-w.done
		if !o.lead {
			return db.settle(ctx, w, o)
		}
	}
	// Only a leader takes from the queues and there is one at a time, so w is still in
	// its queue, first: it was first of the two when it was told to lead, or alone when it
	// found no commit under way, and what came since went behind it. So the group, the
	// firsts and then the rest, holds it.
	db.wmu.Lock()
	k := min(len(db.firsts), maxGroup)
	if !first {
		k = min(k, maxGroup-1)
	}
	n := min(len(db.queue), maxGroup-k)
	group := make([]*write, 0, k+n)
	group = append(append(group, db.firsts[:k]...), db.queue[:n]...)
	db.firsts, db.queue = db.firsts[k:], db.queue[n:]
	db.wmu.Unlock()
	db.lead(group)
	return db.settle(ctx, w, <-w.done)
}

// WriteCounts is how many writes the store was asked for and how many transactions
// committed them since it was opened: the writes per commit say how well they were grouped.
func (db *DB) WriteCounts() (writes, commits int64) {
	return db.writes.Load(), db.commits.Load()
}

// lead commits group and hands the lead to the first writer queued meanwhile, a first one
// before the others. The hand-off
// is deferred so that it happens even when a function ends the leader's goroutine, as
// runtime.Goexit (t.FailNow in a test) does: the writers behind would wait forever.
func (db *DB) lead(group []*write) {
	defer func() {
		db.wmu.Lock()
		defer db.wmu.Unlock()
		switch {
		case len(db.firsts) > 0:
			db.firsts[0].done <- outcome{lead: true}
		case len(db.queue) > 0:
			db.queue[0].done <- outcome{lead: true}
		default:
			db.writing, db.queue, db.firsts = false, nil, nil
		}
	}()
	db.commit(group)
}

// settle returns a writer's result, running its function alone first if it has to.
func (db *DB) settle(ctx context.Context, w *write, o outcome) error {
	switch {
	case o.solo:
		return db.do(ctx, true, w.fn)
	case o.gone:
		return ctx.Err()
	}
	return o.err
}

// commit runs the group's functions in one transaction and tells each writer its result.
// With an execution trace on (go tool trace), a group is a region "store: group" that logs
// its size ("group size"), and its commit (bbolt's page writes and syncs) a region "store:
// commit" in it, which logs the pages it wrote ("commit pages"); each caller's wait from
// enqueueing to its result is a region "store: write".
func (db *DB) commit(group []*write) {
	defer trace.StartRegion(context.Background(), "store: group").End()
	if trace.IsEnabled() {
		trace.Log(context.Background(), "group size", strconv.Itoa(len(group)))
	}
	var btx *bolt.Tx
	returned := false
	defer func() {
		if returned {
			return
		}
		// A function ended the goroutine (runtime.Goexit) before any writer still in the
		// group was told anything: release bbolt's write lock, and let each of them run
		// alone in its own goroutine.
		if btx != nil {
			_ = btx.Rollback()
		}
		for _, w := range group {
			w.done <- outcome{solo: true}
		}
	}()
	for len(group) > 0 {
		var err error
		if btx, err = db.bolt.Begin(true); err != nil {
			err = db.storeError(err)
			for _, w := range group {
				w.done <- outcome{err: err}
			}
			break
		}
		wrote, spoiled := false, -1
		for i, w := range group {
			// Checked here because the writer may have waited for the commits before.
			select {
			case <-w.gone:
				w.err, w.skip = nil, true
				continue
			default:
				w.skip = false
			}
			t := &tx{btx: btx, db: db}
			var panicked bool
			w.err, panicked = call(w.fn, t)
			if panicked || (w.err != nil && t.wrote) {
				spoiled = i
				break
			}
			wrote = wrote || t.wrote
		}
		if spoiled >= 0 {
			_ = btx.Rollback()
			btx = nil
			group[spoiled].done <- outcome{solo: true}
			group = slices.Delete(group, spoiled, spoiled+1)
			continue
		}
		var cerr error
		if wrote {
			region := trace.StartRegion(context.Background(), "store: commit")
			cerr = btx.Commit()
			region.End()
			if trace.IsEnabled() {
				st := btx.Stats()
				trace.Log(context.Background(), "commit pages", strconv.FormatInt(st.GetWrite(), 10))
			}
			if cerr != nil {
				cerr = db.storeError(cerr)
			} else {
				db.writeErr.Store(nil)
				db.commits.Add(1)
			}
		} else {
			// Nothing to make durable: a rollback costs no sync.
			_ = btx.Rollback()
		}
		for _, w := range group {
			if w.err == nil && !w.skip {
				w.err = cerr
			}
			w.done <- outcome{err: w.err, gone: w.skip}
		}
		break
	}
	returned = true
}

// call runs fn on t and closes t, turning a panic into a report: the leader must roll the
// transaction back, or bbolt's only write lock would stay taken.
func call(fn func(t *tx) error, t *tx) (err error, panicked bool) {
	defer func() {
		t.closed = true
		if recover() != nil {
			panicked = true
		}
	}()
	return fn(t), false
}

// storeError wraps a failure of bbolt's own (not of a function's) to begin or commit a write,
// and keeps it for WriteError.
func (db *DB) storeError(err error) error {
	err = fmt.Errorf("store update: %w", err)
	db.writeErr.Store(&err)
	return err
}
