package store

import "github.com/loopbot/loopbot/bot"

// Step boundaries (bot.BoundaryCounter).
//
// At every step boundary a working run asks whether someone asked it to pause, what people
// said to it and its channel's autonomy level. Every write to a bbolt file is made through
// its one handle, in this process (the file lock keeps other processes out; replicas in
// tests are bots on one handle), so the handle can count the commits that change those, and
// a run's loop reads the store only when the count moved instead of at every step.

var _ bot.BoundaryCounter = (*DB)(nil)

// BoundaryWrites returns how many committed transactions wrote something a working run reads
// at its step boundaries.
func (db *DB) BoundaryWrites() uint64 { return db.boundary.Load() }

// boundaryWritten counts t's transaction in BoundaryWrites once it commits: a pause asked (a
// run's head or record written with PauseBy set), a conversation written with notes in it,
// or a channel's autonomy level. It counts after the commit, when a transaction that begins
// sees the write: a loop that reads the count and then the store finds the write, or finds
// the count moved at its next boundary. A transaction rolled back counts nothing; one that
// wrote such a record and a function of its group that failed counts all the same, which
// costs the runs one read.
func (t *tx) boundaryWritten() {
	if t.counted {
		return
	}
	t.counted = true
	db := t.db
	t.btx.OnCommit(func() { db.boundary.Add(1) })
}
