package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/loopbot/loopbot/bot"
)

// openJournaled opens the database at path with its intake journal and waits until the
// journal is ready.
func openJournaled(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(path, WithIntake())
	if err != nil {
		t.Fatal(err)
	}
	<-db.intake.made
	db.intake.wmu.Lock()
	defer db.intake.wmu.Unlock()
	if db.intake.f == nil {
		t.Fatalf("the intake journal is not ready: %v", db.intake.err)
	}
	return db
}

// crash lets go of db as a killed process would: the journal is not moved, the files are
// closed.
func crash(t *testing.T, db *DB) {
	t.Helper()
	j := db.intake
	j.stop()
	<-j.made
	j.wmu.Lock()
	j.closed = true
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
	j.wmu.Unlock()
	if err := db.bolt.Close(); err != nil {
		t.Fatal(err)
	}
}

func intakeEvents(ids ...string) []bot.Event {
	evs := make([]bot.Event, len(ids))
	for i, id := range ids {
		evs[i] = bot.Event{Kind: bot.EventMention, ID: id, Thread: bot.ThreadRef{Platform: "slack", Channel: "C1", Thread: "1"},
			User: bot.User{ID: "U1"}, Text: "check the build " + id, At: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)}
	}
	return evs
}

func accept(t *testing.T, db *DB, seq int64, ids ...string) []bool {
	t.Helper()
	added, err := db.AcceptInbox(t.Context(), "replica-1", seq, intakeEvents(ids...))
	if err != nil {
		t.Fatal(err)
	}
	return added
}

// inboxIDs lists the inbox as a read transaction sees it, journal included.
func inboxIDs(t *testing.T, db *DB) []string {
	t.Helper()
	var ids []string
	err := db.View(t.Context(), func(tx bot.Tx) error {
		es, err := tx.Inbox()
		for _, e := range es {
			ids = append(ids, e.Event.ID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// bucketIDs lists the inbox bucket alone, without the journal.
func bucketIDs(t *testing.T, db *DB) []string {
	t.Helper()
	var ids []string
	err := db.bolt.View(func(btx *bolt.Tx) error {
		return btx.Bucket(bucketInbox).ForEach(func(k, _ []byte) error {
			ids = append(ids, string(k))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func wantIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	if len(got)+len(want) > 20 {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Errorf("%s: %d entries, want %d; they differ from the %dth on", what, len(got), len(want), i+1)
		return
	}
	t.Errorf("%s: %q, want %q", what, got, want)
}

func deleteInbox(t *testing.T, db *DB, id string) {
	t.Helper()
	if err := db.Update(t.Context(), func(tx bot.Tx) error { return tx.DeleteInbox(id) }); err != nil {
		t.Fatal(err)
	}
}

// TestIntakeAcceptIsOneSyncNoCommit checks that a batch the journal takes costs no bbolt
// commit, and that the next write transaction on the inbox moves it there.
func TestIntakeAcceptIsOneSyncNoCommit(t *testing.T) {
	db := openJournaled(t, filepath.Join(t.TempDir(), "loopbot.db"))
	defer db.Close()
	commits := db.WriteStats().Commits
	wantAdded(t, accept(t, db, 1, "Ev1", "Ev2", "Ev3"), true, true, true)
	if got := db.WriteStats().Commits - commits; got != 0 {
		t.Errorf("%d commits for a journaled batch, want 0", got)
	}
	wantIDs(t, "bucket before a write", bucketIDs(t, db))
	wantIDs(t, "inbox before a write", inboxIDs(t, db), "Ev1", "Ev2", "Ev3")
	deleteInbox(t, db, "Ev2")
	wantIDs(t, "bucket after a delete", bucketIDs(t, db), "Ev1", "Ev3")
	wantIDs(t, "inbox after a delete", inboxIDs(t, db), "Ev1", "Ev3")
}

// TestIntakeBatchIsSyncedBeforeItReturns: the platform is acknowledged once AcceptInbox
// returns, so a journaled batch returns after exactly one sync of what it wrote; and a batch
// whose sync fails is not taken as durable but committed to bbolt instead.
func TestIntakeBatchIsSyncedBeforeItReturns(t *testing.T) {
	db := openJournaled(t, filepath.Join(t.TempDir(), "loopbot.db"))
	defer db.Close()
	var syncs atomic.Int32
	var fail atomic.Bool
	db.intake.wmu.Lock()
	db.intake.syncData = func(f *os.File) error {
		syncs.Add(1)
		if fail.Load() {
			return errors.New("sync: input/output error")
		}
		return fdatasync(f)
	}
	db.intake.wmu.Unlock()

	wantAdded(t, accept(t, db, 1, "Ev1", "Ev2"), true, true)
	if n := syncs.Load(); n != 1 {
		t.Errorf("%d syncs for a journaled batch, want 1 before AcceptInbox returned", n)
	}

	fail.Store(true)
	commits := db.WriteStats().Commits
	wantAdded(t, accept(t, db, 2, "Ev3"), true)
	if got := db.WriteStats().Commits - commits; got == 0 {
		t.Errorf("a batch whose journal sync failed made no commit, want it committed to bbolt")
	}
	wantIDs(t, "bucket after the failed sync", bucketIDs(t, db), "Ev1", "Ev2", "Ev3")
}

func wantAdded(t *testing.T, got []bool, want ...bool) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("added %v, want %v", got, want)
	}
}

// TestIntakeCrashBeforeMove kills the process between the journal's sync (the ack) and the
// transaction that would have moved the entries: the next Open moves them, once.
func TestIntakeCrashBeforeMove(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopbot.db")
	db := openJournaled(t, path)
	db.intake.skipMove.Store(true)
	accept(t, db, 1, "Ev1", "Ev2")
	accept(t, db, 3, "Ev3")
	deleteInbox(t, db, "Ev1") // moves nothing, as a crash right after the sync would not
	crash(t, db)

	plain, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "inbox without the journal", inboxIDs(t, plain))
	plain.Close()

	db = openJournaled(t, path)
	wantIDs(t, "bucket after the reopen", bucketIDs(t, db), "Ev1", "Ev2", "Ev3")
	if n := db.IntakeReplayed(); n != 3 {
		t.Errorf("IntakeReplayed %d, want 3", n)
	}
	// Handled, as Start would; another crash and reopen brings none of them back.
	for _, id := range []string{"Ev1", "Ev2", "Ev3"} {
		deleteInbox(t, db, id)
	}
	crash(t, db)
	db = openJournaled(t, path)
	defer db.Close()
	wantIDs(t, "inbox after the second reopen", inboxIDs(t, db))
	// The new process journals from a generation the old records cannot be read as.
	accept(t, db, 4, "Ev4")
	if g := db.intake.gen; g < 2 {
		t.Errorf("the reopened journal writes generation %d", g)
	}
}

// TestIntakeTornRecord cuts the last record of a journal at every byte, over zeros and over
// an older record: the scan keeps everything before it and stops there.
func TestIntakeTornRecord(t *testing.T) {
	entry := func(gen uint32, id string) []byte {
		e := bot.InboxEntry{Seq: 1, Event: intakeEvents(id)[0]}
		data, err := appendInboxEntry(nil, &e)
		if err != nil {
			t.Fatal(err)
		}
		return appendRecord(nil, gen, data)
	}
	acked := append(entry(1, "Ev1"), entry(1, "Ev2")...)
	torn := entry(1, "Ev3")
	for _, under := range []struct {
		name string
		b    []byte
	}{{"zeros", make([]byte, len(torn))}, {"an older record", entry(1, "Ev-old")[:len(torn)]}} {
		for cut := range len(torn) {
			file := make([]byte, intakeSize)
			n := copy(file[intakeHeader:], acked)
			copy(file[intakeHeader+n:], under.b)
			copy(file[intakeHeader+n:], torn[:cut])
			recs, _, err := scanJournal(bytesReader(file), position{})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range recs {
				ids = append(ids, r.id)
			}
			if !slices.Equal(ids, []string{"Ev1", "Ev2"}) {
				t.Fatalf("over %s, cut at %d of %d: read %q", under.name, cut, len(torn), ids)
			}
		}
	}
}

// TestIntakeTornRecordReopen tears the last batch's record in the file itself: Open moves
// the batches before it.
func TestIntakeTornRecordReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopbot.db")
	db := openJournaled(t, path)
	db.intake.skipMove.Store(true)
	accept(t, db, 1, "Ev1", "Ev2")
	end := db.intake.off
	accept(t, db, 3, "Ev3")
	torn := db.intake.off
	crash(t, db)
	f, err := os.OpenFile(IntakePath(path), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The record's second half never reached the disk.
	if _, err := f.WriteAt(make([]byte, (torn-end)/2), end+(torn-end)/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	db = openJournaled(t, path)
	defer db.Close()
	wantIDs(t, "inbox", inboxIDs(t, db), "Ev1", "Ev2")
}

// TestIntakeStaleGeneration checks that the records of a generation already moved, lying
// after a newer generation's, are not read again.
func TestIntakeStaleGeneration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopbot.db")
	db := openJournaled(t, path)
	accept(t, db, 1, "Ev1", "Ev2", "Ev3", "Ev4")
	for _, id := range []string{"Ev1", "Ev2", "Ev3", "Ev4"} {
		deleteInbox(t, db, id)
	}
	db.intake.skipMove.Store(true)
	accept(t, db, 5, "Ev5")
	if db.intake.gen != 2 {
		t.Fatalf("the second batch went into generation %d, want 2", db.intake.gen)
	}
	crash(t, db)
	db = openJournaled(t, path)
	defer db.Close()
	wantIDs(t, "inbox", inboxIDs(t, db), "Ev5")
}

// TestIntakeClaimMovesInItsTransaction claims an event in the transaction that moves it: the
// claim and the entry's removal commit together, and a transaction rolled back moves
// nothing for good.
func TestIntakeClaimMovesInItsTransaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopbot.db")
	db := openJournaled(t, path)
	accept(t, db, 1, "Ev1", "Ev2")
	errRolledBack := errors.New("rolled back")
	err := db.Update(t.Context(), func(tx bot.Tx) error {
		if err := tx.DeleteInbox("Ev2"); err != nil {
			return err
		}
		return errRolledBack
	})
	if !errors.Is(err, errRolledBack) {
		t.Fatal(err)
	}
	wantIDs(t, "bucket after a rollback", bucketIDs(t, db))
	err = db.Update(t.Context(), func(tx bot.Tx) error {
		first, err := tx.ClaimEvent("Ev1", time.Now(), time.Hour)
		if err != nil || !first {
			return fmt.Errorf("claim: %v, %w", first, err)
		}
		return tx.DeleteInbox("Ev1")
	})
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "bucket after the claim", bucketIDs(t, db), "Ev2")
	crash(t, db)
	db = openJournaled(t, path)
	defer db.Close()
	wantIDs(t, "inbox after a crash", inboxIDs(t, db), "Ev2")
}

// TestIntakeDedupe checks a redelivery against an entry journaled and not moved, one moved,
// and one twice in a batch.
func TestIntakeDedupe(t *testing.T) {
	db := openJournaled(t, filepath.Join(t.TempDir(), "loopbot.db"))
	defer db.Close()
	wantAdded(t, accept(t, db, 1, "Ev1", "Ev2", "Ev1"), true, true, false)
	wantAdded(t, accept(t, db, 4, "Ev2", "Ev3"), false, true)
	deleteInbox(t, db, "none") // moves them
	wantIDs(t, "bucket", bucketIDs(t, db), "Ev1", "Ev2", "Ev3")
	wantAdded(t, accept(t, db, 6, "Ev3", "Ev4"), false, true)
	// A redelivery of an entry moved in a generation let go is found in the bucket.
	for _, id := range []string{"Ev1", "Ev2", "Ev4"} {
		deleteInbox(t, db, id)
	}
	accept(t, db, 7, "Ev5")
	deleteInbox(t, db, "Ev5")
	accept(t, db, 8, "Ev6")
	if _, ok := db.intake.ids["Ev3"]; ok {
		t.Fatal("Ev3 is still among the journaled records two generations on")
	}
	wantAdded(t, accept(t, db, 9, "Ev3"), false)
	wantIDs(t, "inbox", inboxIDs(t, db), "Ev3", "Ev6")
}

// TestIntakeFull fills the journal: a batch that does not fit moves what it holds and
// starts it again; one larger than the journal, or one that comes while nothing can be
// moved, goes into a transaction.
func TestIntakeFull(t *testing.T) {
	db := openJournaled(t, filepath.Join(t.TempDir(), "loopbot.db"))
	defer db.Close()
	ids := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%04d", prefix, i)
		}
		return out
	}
	a := ids("A", 100)
	accept(t, db, 1, a...)
	// Batches of a little under half the journal: the third does not fit.
	n := int(intakeSize*100/(db.intake.off-intakeHeader))/2 - 10
	b, c := ids("B", n), ids("C", n)
	accept(t, db, 1000, b...)
	commits := db.WriteStats().Commits
	accept(t, db, 5000, c...)
	if g := db.intake.gen; g != 2 {
		t.Errorf("after a full journal the batch went into generation %d, want 2", g)
	}
	if got := db.WriteStats().Commits - commits; got != 1 {
		t.Errorf("%d commits to start the journal again, want 1", got)
	}
	all := append(slices.Clone(a), b...)
	wantIDs(t, "bucket", bucketIDs(t, db), all...)
	all = append(all, c...)
	wantIDs(t, "inbox", inboxIDs(t, db), all...)

	// Larger than the journal.
	big := ids("D", 3*n)
	commits = db.WriteStats().Commits
	wantAdded(t, accept(t, db, 9000, append(big, "C-0000")...)[3*n:], false)
	if got := db.WriteStats().Commits - commits; got != 1 {
		t.Errorf("%d commits for a batch larger than the journal, want 1", got)
	}
	wantIDs(t, "inbox after the large batch", inboxIDs(t, db), append(all, big...)...)
	wantIDs(t, "bucket after the large batch", bucketIDs(t, db), append(all, big...)...)
}

// TestIntakeConcurrentAccepts accepts overlapping batches from several goroutines while the
// entries are claimed: every event is added once.
func TestIntakeConcurrentAccepts(t *testing.T) {
	db := openJournaled(t, filepath.Join(t.TempDir(), "loopbot.db"))
	defer db.Close()
	var mu sync.Mutex
	added := map[string]int{}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for k := range 30 {
				ids := make([]string, 5)
				for i := range ids {
					ids[i] = fmt.Sprintf("Ev%03d", (k*5+i+g*3)%200)
				}
				got, err := db.AcceptInbox(t.Context(), "r", int64(g*1000+k*5), intakeEvents(ids...))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for i, ok := range got {
					if ok {
						added[ids[i]]++
					}
				}
				mu.Unlock()
				if k%7 == 0 {
					deleteInbox(t, db, "none")
				}
			}
		})
	}
	wg.Wait()
	for id, n := range added {
		if n != 1 {
			t.Errorf("%s added %d times", id, n)
		}
	}
	if got := len(inboxIDs(t, db)); got != len(added) {
		t.Errorf("inbox holds %d entries, %d added", got, len(added))
	}
}

// TestIntakeCloseMoves checks that Close leaves the journal's entries in the database
// itself, for the tools that read it without the journal.
func TestIntakeCloseMoves(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopbot.db")
	db := openJournaled(t, path)
	accept(t, db, 1, "Ev1", "Ev2")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := CheckFile(t.Context(), path)
	if err != nil || len(r.Problems) > 0 {
		t.Fatalf("check: %v %v", r, err)
	}
	plain, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	wantIDs(t, "bucket", bucketIDs(t, plain), "Ev1", "Ev2")
}

// TestIntakeOtherDatabase checks that a journal the database does not name (left by a
// database removed since) is not read, and is made again.
func TestIntakeOtherDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopbot.db")
	db := openJournaled(t, path)
	db.intake.skipMove.Store(true)
	accept(t, db, 1, "Ev1")
	id := db.intake.id
	crash(t, db)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	db = openJournaled(t, path)
	defer db.Close()
	wantIDs(t, "inbox", inboxIDs(t, db))
	if db.intake.id == id {
		t.Error("the journal was not made again")
	}
}

// TestIntakeNotReady checks the bbolt path: a journal that cannot be made, and one that
// failed a write.
func TestIntakeNotReady(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "loopbot.db")
	if err := os.Mkdir(IntakePath(path)+".tmp", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(IntakePath(path)+".tmp", "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path, WithIntake())
	if err != nil {
		t.Fatal(err)
	}
	<-db.intake.made
	if db.intake.err == nil {
		t.Fatal("the journal was made over a directory")
	}
	commits := db.WriteStats().Commits
	wantAdded(t, accept(t, db, 1, "Ev1", "Ev1"), true, false)
	if got := db.WriteStats().Commits - commits; got != 1 {
		t.Errorf("%d commits, want 1", got)
	}
	wantIDs(t, "bucket", bucketIDs(t, db), "Ev1")
	db.Close()

	db = openJournaled(t, filepath.Join(dir, "second.db"))
	defer db.Close()
	accept(t, db, 1, "Ev1")
	db.intake.f.Close() // the next write fails
	commits = db.WriteStats().Commits
	wantAdded(t, accept(t, db, 2, "Ev1", "Ev2"), false, true)
	if got := db.WriteStats().Commits - commits; got != 1 {
		t.Errorf("%d commits after a failed write, want 1", got)
	}
	wantIDs(t, "bucket after a failed write", bucketIDs(t, db), "Ev1", "Ev2")
	accept(t, db, 3, "Ev3")
	wantIDs(t, "bucket once the journal failed", bucketIDs(t, db), "Ev1", "Ev2", "Ev3")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	plain, err := Open(filepath.Join(dir, "second.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	wantIDs(t, "bucket after Close", bucketIDs(t, plain), "Ev1", "Ev2", "Ev3")
}

// TestIntakeCancelledMaking closes the database while its journal is being made.
func TestIntakeCancelledMaking(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "loopbot.db"), WithIntake())
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AcceptInbox(context.Background(), "r", 1, intakeEvents("Ev1")); err == nil {
		t.Error("accepted after Close")
	}
}

// TestIntakeReadSnapshot reads the inbox in a read transaction while the journal's entries
// are moved and let go: it sees each entry once, from the journal or the inbox, or, once the
// journal no longer holds what its snapshot needs, fails rather than miss one.
func TestIntakeReadSnapshot(t *testing.T) {
	db := openJournaled(t, filepath.Join(t.TempDir(), "loopbot.db"))
	defer db.Close()
	accept(t, db, 1, "Ev1")
	read := func(tx bot.Tx) []string {
		es, err := tx.Inbox()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range es {
			ids = append(ids, e.Event.ID)
		}
		return ids
	}
	err := db.View(t.Context(), func(tx bot.Tx) error {
		wantIDs(t, "before the move", read(tx), "Ev1")
		deleteInbox(t, db, "none") // moves Ev1
		accept(t, db, 2, "Ev2")    // a new generation
		wantIDs(t, "after the move", read(tx), "Ev1", "Ev2")
		deleteInbox(t, db, "none")
		accept(t, db, 3, "Ev3") // lets Ev1's generation go
		if _, err := tx.Inbox(); !errors.Is(err, errIntakeSnapshot) {
			t.Errorf("an inbox read from a snapshot older than the journal: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "a new read", inboxIDs(t, db), "Ev1", "Ev2", "Ev3")
}

// TestIntakeGroupsConcurrentAccepts holds the journal's writer while two more calls queue
// behind the one waiting for it: they are written together, with one sync, and a redelivery
// in the one is found in the other.
func TestIntakeGroupsConcurrentAccepts(t *testing.T) {
	db := openJournaled(t, filepath.Join(t.TempDir(), "loopbot.db"))
	defer db.Close()
	j := db.intake
	j.wmu.Lock()
	results := make([][]bool, 3)
	var wg sync.WaitGroup
	for i, ids := range [][]string{{"Ev1"}, {"Ev2", "Ev3"}, {"Ev3", "Ev4"}} {
		if i > 0 {
			// The first holds the lead and waits for the writer; the others queue in order.
			waitFor(t, func() bool {
				j.qmu.Lock()
				defer j.qmu.Unlock()
				return len(j.queue) == i-1 && j.writing
			})
		}
		wg.Go(func() {
			var err error
			if results[i], err = db.AcceptInbox(context.Background(), "r", int64(10*i), intakeEvents(ids...)); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, func() bool {
		j.qmu.Lock()
		defer j.qmu.Unlock()
		return len(j.queue) == 2
	})
	writes := j.writes
	j.wmu.Unlock()
	wg.Wait()
	if got := j.writes - writes; got != 2 {
		t.Errorf("%d journal writes, want 2: the first alone, the two behind it together", got)
	}
	want := [][]bool{{true}, {true, true}, {false, true}}
	for i := range want {
		wantAdded(t, results[i], want[i]...)
	}
	wantIDs(t, "inbox", inboxIDs(t, db), "Ev1", "Ev2", "Ev3", "Ev4")
}

// waitFor waits until cond holds, which another goroutine is about to make true.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the condition never held")
		}
		runtime.Gosched()
	}
}

// TestIntakeJournalRemade removes the journal of a database that has moved a generation:
// the journal made again starts after it, so that its records are read after a crash.
func TestIntakeJournalRemade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopbot.db")
	db := openJournaled(t, path)
	accept(t, db, 1, "Ev1", "Ev2", "Ev3")
	deleteInbox(t, db, "Ev1")
	crash(t, db)
	if err := os.Remove(IntakePath(path)); err != nil {
		t.Fatal(err)
	}
	db = openJournaled(t, path)
	db.intake.skipMove.Store(true)
	accept(t, db, 4, "Ev4")
	crash(t, db)
	db = openJournaled(t, path)
	defer db.Close()
	wantIDs(t, "inbox", inboxIDs(t, db), "Ev2", "Ev3", "Ev4")
}
