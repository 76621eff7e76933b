package store_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// bbolt's page layout, for damaging a file as a disk or a careless copy would: a page
// starts with its id (8 bytes), flags (2), element count (2) and overflow (4); a branch
// page's elements are 16 bytes each, the child's page id in the last 8.
const (
	pageSize     = 4096 // bbolt's default, the OS page size on the machines tests run on
	branchPage   = 0x01
	leafPage     = 0x02
	freelistPage = 0x10
)

// filledDB writes a database of sixty runs of 30 kB, big enough that the runs bucket has
// branch pages, and returns its path once closed.
func filledDB(t *testing.T) string {
	t.Helper()
	return writeRuns(t, filepath.Join(t.TempDir(), "loopbot.db"), 60)
}

// writeRuns writes n runs of 30 kB to a new database at path and closes it.
func writeRuns(tb testing.TB, path string, n int) string {
	tb.Helper()
	db, err := store.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	err = db.Update(context.Background(), func(tx bot.Tx) error {
		for i := range n {
			r := benchRun()
			r.ID = fmt.Sprintf("run-%03d", i)
			r.State.RunID = r.ID
			if err := tx.PutRun(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := db.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// inUse is how far the file's pages reach, by its newer meta page (its high-water page id):
// bbolt grows the file ahead of them (initialMmapSize).
func inUse(data []byte) int {
	const pgidAt, txidAt = 16 + 40, 16 + 48 // after the page header: the meta's pgid and txid
	meta := 0
	if binary.LittleEndian.Uint64(data[pageSize+txidAt:]) > binary.LittleEndian.Uint64(data[txidAt:]) {
		meta = pageSize
	}
	return int(binary.LittleEndian.Uint64(data[meta+pgidAt:])) * pageSize
}

// pages returns the file's pages whose flags are flag.
func pages(t *testing.T, data []byte, flag uint16) []int {
	t.Helper()
	var out []int
	for off := 2 * pageSize; off+pageSize <= len(data); off += pageSize {
		if binary.LittleEndian.Uint64(data[off:]) == uint64(off/pageSize) && binary.LittleEndian.Uint16(data[off+8:]) == flag {
			out = append(out, off)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no page with flags %#x in the file", flag)
	}
	return out
}

// TestOpenRefusesDamagedFile damages a closed file in the ways the review found crash the
// bot, and checks that Open refuses each with ErrDamaged, naming the file and what to do,
// instead of a SIGBUS or a panic; CheckFile says the same without opening it for writing.
func TestOpenRefusesDamagedFile(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, data []byte) []byte
		want   string
	}{
		{"cut short", func(t *testing.T, data []byte) []byte {
			return data[:inUse(data)/2/pageSize*pageSize]
		}, "it was cut short"},
		{"cut inside the first page", func(t *testing.T, data []byte) []byte {
			return data[:100]
		}, "invalid"},
		{"branch page names a page past the end", func(t *testing.T, data []byte) []byte {
			off := pages(t, data, branchPage)[0]
			binary.LittleEndian.PutUint64(data[off+16+8:], uint64(len(data)/pageSize+10))
			return data
		}, "reading the file failed"},
		{"branch page names a page far past the end", func(t *testing.T, data []byte) []byte {
			off := pages(t, data, branchPage)[0]
			binary.LittleEndian.PutUint64(data[off+16+8:], 1<<40)
			return data
		}, "reading the file failed"},
		{"leaf page overwritten", func(t *testing.T, data []byte) []byte {
			off := pages(t, data, leafPage)[0]
			for i := 8; i < pageSize; i++ {
				data[off+i] = 0xa5
			}
			return data
		}, "page"},
		{"meta pages overwritten", func(t *testing.T, data []byte) []byte {
			for i := 0; i < 2*pageSize; i++ {
				data[i] = 0
			}
			return data
		}, "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filledDB(t)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tt.damage(t, data), 0o600); err != nil {
				t.Fatal(err)
			}
			db, err := store.Open(path)
			if err == nil {
				db.Close()
				t.Fatal("Open accepted the damaged file")
			}
			if !errors.Is(err, store.ErrDamaged) {
				t.Fatalf("Open: %v, want ErrDamaged", err)
			}
			for _, want := range []string{path, tt.want, "restore it from a backup", "loopbot db check"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Open: %q does not say %q", err, want)
				}
			}
			r, err := store.CheckFile(t.Context(), path)
			switch {
			case errors.Is(err, store.ErrDamaged):
			case err != nil:
				t.Fatalf("CheckFile: %v", err)
			case len(r.Problems) == 0:
				t.Fatal("CheckFile found no problem")
			}
			// The refused file was left as it was found, and its lock released.
			if got, err := os.ReadFile(path); err != nil || len(got) != len(tt.damage(t, data)) {
				t.Errorf("the file changed: %d bytes, %v", len(got), err)
			}
		})
	}
}

// TestOpenReleasesLockAfterPanic overwrites the free list, which bbolt reads while it
// opens and panics on, and checks that the file's lock was let go with the file: once the
// file is repaired, the same process opens it.
func TestOpenReleasesLockAfterPanic(t *testing.T) {
	path := filledDB(t)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), good...)
	// Each meta page names its free list 48 bytes into the page.
	for _, meta := range []int{0, pageSize} {
		off := int(binary.LittleEndian.Uint64(bad[meta+48:])) * pageSize
		if binary.LittleEndian.Uint16(bad[off+8:]) != freelistPage {
			t.Fatalf("page %d is no free list", off/pageSize)
		}
		for i := 8; i < pageSize; i++ {
			bad[off+i] = 0xa5
		}
	}
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = store.Open(path, store.WithLockTimeout(50*time.Millisecond))
	if !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), "reading the file failed") {
		t.Fatalf("Open: %v, want ErrDamaged from a panic", err)
	}
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	openTest(t, path)
}

// putOutbox stores items in a new database and returns its path, closed.
func putOutbox(t *testing.T, keys ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "loopbot.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	err = db.Update(t.Context(), func(tx bot.Tx) error {
		for i, k := range keys {
			it := bot.OutboxItem{Key: k, Kind: bot.OutboxNotice, Text: "notice " + k, CreatedAt: now.Add(time.Duration(i) * time.Second),
				Thread: bot.ThreadRef{Platform: "web", Channel: "c", Thread: "t"}}
			if err := tx.PutOutbox(it); err != nil {
				return err
			}
		}
		return tx.PutConversation(&bot.Conversation{Thread: bot.ThreadRef{Platform: "web", Channel: "c", Thread: "t"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// overwrite replaces the value under key in bucket behind the store's back.
func overwrite(t *testing.T, path, bucket, key, value string) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(func(btx *bolt.Tx) error { return btx.Bucket([]byte(bucket)).Put([]byte(key), []byte(value)) }); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptOutboxRecordIsQuarantined corrupts one of three outbox items: the outbox lists
// the other two, the bad one is moved to the quarantine once, the hook hears of it once,
// and the file checks clean afterwards.
func TestCorruptOutboxRecordIsQuarantined(t *testing.T) {
	path := putOutbox(t, "notice/1", "notice/2", "notice/3")
	const bad = `{"key":"notice/2","created_at":"yesterday"}`
	overwrite(t, path, "outbox", "notice/2", bad)

	r, err := store.CheckFile(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0].Error(), `outbox record "notice/2"`) {
		t.Errorf("CheckFile before the quarantine: %v, want the bad item", r.Problems)
	}

	var heard []store.Quarantined
	db, err := store.Open(path, store.WithQuarantineHook(func(q store.Quarantined) { heard = append(heard, q) }))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for range 3 {
		// The dispatcher lists the outbox on every pass: a bad item must neither fail a
		// pass nor be reported twice. The first View lists it twice in one transaction.
		keys = nil
		err := db.View(t.Context(), func(tx bot.Tx) error {
			for range 2 {
				items, err := tx.Outbox()
				if err != nil {
					return err
				}
				keys = keys[:0]
				for _, it := range items {
					keys = append(keys, it.Key)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Outbox: %v", err)
		}
	}
	if got := strings.Join(keys, " "); got != "notice/1 notice/3" {
		t.Errorf("outbox = %s, want the two good items", got)
	}
	if len(heard) != 1 || heard[0].Bucket != "outbox" || string(heard[0].Key) != "notice/2" || string(heard[0].Value) != bad || heard[0].Reason == "" {
		t.Errorf("hook heard %+v, want the bad item once", heard)
	}
	q, err := db.Quarantine(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 1 || string(q[0].Value) != bad || q[0].At.IsZero() {
		t.Errorf("quarantine = %+v, want the bad item", q)
	}
	if err := db.Check(t.Context()); err != nil {
		t.Errorf("Check after the quarantine: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	r, err = store.CheckFile(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) != 0 || len(r.Quarantined) != 1 {
		t.Errorf("CheckFile after the quarantine: problems %v, quarantined %d; want none and 1", r.Problems, len(r.Quarantined))
	}
}

// TestCorruptRecordReplacedMeanwhile reads a conversation that does not decode, as absent,
// and puts a new one in its place in the same transaction: the new one stays, and the bad
// one is kept in the quarantine.
func TestCorruptRecordReplacedMeanwhile(t *testing.T) {
	path := putOutbox(t)
	thread := bot.ThreadRef{Platform: "web", Channel: "c", Thread: "t"}
	overwrite(t, path, "conversations", thread.Key(), `{"thread":`)
	n := 0
	db, err := store.Open(path, store.WithQuarantineHook(func(store.Quarantined) { n++ }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	err = db.Update(t.Context(), func(tx bot.Tx) error {
		_, err := tx.Conversation(thread)
		if !errors.Is(err, bot.ErrNotFound) {
			return fmt.Errorf("Conversation: %v, want ErrNotFound", err)
		}
		return tx.PutConversation(&bot.Conversation{Thread: thread, Runs: []string{"run-new"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(t.Context(), func(tx bot.Tx) error {
		c, err := tx.Conversation(thread)
		if err != nil || len(c.Runs) != 1 || c.Runs[0] != "run-new" {
			return fmt.Errorf("the new conversation is gone: %+v, %v", c, err)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	if q, err := db.Quarantine(t.Context()); err != nil || len(q) != 1 || string(q[0].Value) != `{"thread":` || n != 1 {
		t.Errorf("quarantine = %+v, %v, hook told %d times; want the bad conversation once", q, err, n)
	}
}

// TestRunsAreNotQuarantined: a run is four records kept in step, so one that does not
// decode stays where it is and fails the reads that name it, and Check reports it.
func TestRunsAreNotQuarantined(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopbot.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(t.Context(), func(tx bot.Tx) error {
		return tx.PutRun(&bot.RunRecord{ID: "run-1", Status: agent.StatusQueued})
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	overwrite(t, path, "runs", "\x00\x00\x00\x00\x00\x00\x00\x01", `{"id":`)
	db, err = store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(t.Context(), func(tx bot.Tx) error { _, err := tx.Run("run-1"); return err }); err == nil || errors.Is(err, bot.ErrNotFound) {
		t.Errorf("Run of a run that does not decode: %v, want a decoding error", err)
	}
	if err := db.Check(t.Context()); err == nil {
		t.Error("Check passed a run that does not decode")
	}
}

// TestCompact fills the outbox and empties it again, which leaves the file at its largest,
// and checks that Compact gives the space back, keeps the original as it was, keeps the
// records and the bucket sequences, and never overwrites a backup.
func TestCompact(t *testing.T) {
	path := putOutbox(t)
	db := openTest(t, path)
	text := strings.Repeat("x", 10<<10)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	thread := bot.ThreadRef{Platform: "web", Channel: "c", Thread: "t"}
	err := db.Update(t.Context(), func(tx bot.Tx) error {
		for i := range 300 {
			if err := tx.PutOutbox(bot.OutboxItem{Key: fmt.Sprintf("n/%d", i), Kind: bot.OutboxNotice, Thread: thread, Text: text, CreatedAt: now}); err != nil {
				return err
			}
		}
		return tx.PutRun(&bot.RunRecord{ID: "run-1", Status: agent.StatusQueued})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(t.Context(), func(tx bot.Tx) error {
		for i := range 300 {
			if err := tx.DeleteOutbox(fmt.Sprintf("n/%d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Compact(t.Context(), path, store.WithLockTimeout(50*time.Millisecond)); !errors.Is(err, store.ErrLocked) {
		t.Errorf("Compact of an open database: %v, want ErrLocked", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	c, err := store.Compact(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Before != int64(len(before)) || c.After*4 > c.Before || c.Backup != store.BackupPath(path) {
		t.Errorf("Compact = %+v of a %d-byte file, want a quarter of it or less", c, len(before))
	}
	if kept, err := os.ReadFile(c.Backup); err != nil || string(kept) != string(before) {
		t.Errorf("the backup is not the original: %v", err)
	}
	if _, err := store.Compact(t.Context(), path); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second Compact: %v, want a refusal to overwrite the backup", err)
	}

	db = openTest(t, path)
	err = db.Update(t.Context(), func(tx bot.Tx) error {
		// A new run takes the next key in runs: the sequence survived.
		if err := tx.PutRun(&bot.RunRecord{ID: "run-2", Status: agent.StatusQueued}); err != nil {
			return err
		}
		runs, err := tx.Runs(bot.RunFilter{})
		if err != nil || len(runs) != 2 || runs[0].ID != "run-1" {
			return fmt.Errorf("runs after Compact: %+v, %v", runs, err)
		}
		c, err := tx.Conversation(thread)
		if err != nil || c.Thread != thread {
			return fmt.Errorf("conversation after Compact: %+v, %v", c, err)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// TestQuarantineReasonQuotesNothing: the reason is logged, so it must not quote the record,
// which may hold anything a thread said.
func TestQuarantineReasonQuotesNothing(t *testing.T) {
	const secret = "hunter2-secret"
	tests := []struct{ value, want string }{
		{`{"key":"notice/2","created_at":"` + secret + `"}`, "a field holds a value its type refuses"},
		{`{"key":"notice/2","attempts":"` + secret + `"}`, "field attempts holds a JSON string where int belongs"},
		{`{"key":"notice/2","attempts":31337}x` + secret, "not JSON: broken at byte"},
		{`{"key":"notice/2","text":"` + secret, "not JSON: broken at byte 40"},
	}
	for _, tt := range tests {
		path := putOutbox(t, "notice/1", "notice/2")
		overwrite(t, path, "outbox", "notice/2", tt.value)
		var heard []store.Quarantined
		db, err := store.Open(path, store.WithQuarantineHook(func(q store.Quarantined) { heard = append(heard, q) }))
		if err != nil {
			t.Fatal(err)
		}
		if err := db.View(t.Context(), func(tx bot.Tx) error { _, err := tx.Outbox(); return err }); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if len(heard) != 1 || !strings.Contains(heard[0].Reason, tt.want) || strings.Contains(heard[0].Reason, secret) || strings.Contains(heard[0].Reason, "31337") {
			t.Errorf("%s: heard %+v, want one reason saying %q and quoting nothing", tt.value, heard, tt.want)
		}
	}
}

// BenchmarkOpen opens a database of 300 runs of 30 kB each: the check at open reads the
// whole file, so its cost grows with the file (b.SetBytes: the MB/s figure is the file's
// size over the time to open it).
func BenchmarkOpen(b *testing.B) {
	path := writeRuns(b, filepath.Join(b.TempDir(), "loopbot.db"), 300)
	info, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(info.Size())
	for b.Loop() {
		db, err := store.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		db.Close()
	}
}

// TestOpenWaitingOnReplacedFile opens a file whose lock another holds, and replaces the file
// while Open waits, as `loopbot db compact` does: once the lock is let go, Open must run on
// the new file, not on the old one that is now the backup.
func TestOpenWaitingOnReplacedFile(t *testing.T) {
	if _, err := os.Stat("/proc/self/fdinfo"); err != nil {
		t.Skip("needs /proc to see that Open waits")
	}
	path := putOutbox(t, "notice/1")
	hold, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	var db *store.DB
	go func() {
		var err error
		db, err = store.Open(path, store.WithLockTimeout(time.Minute))
		opened <- err
	}()
	waitOpenForWriting(t, path)

	copyPath := path + ".new"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	overwrite(t, copyPath, "outbox", "notice/new", `{"key":"notice/new","kind":"notice"}`)
	if err := os.Rename(copyPath, path); err != nil {
		t.Fatal(err)
	}
	hold.Close()
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var keys []string
	err = db.View(t.Context(), func(tx bot.Tx) error {
		items, err := tx.Outbox()
		for _, it := range items {
			keys = append(keys, it.Key)
		}
		return err
	})
	if err != nil || !strings.Contains(strings.Join(keys, " "), "notice/new") {
		t.Errorf("Open runs on the replaced file: outbox %q, %v", keys, err)
	}
}

// waitOpenForWriting waits until this process has path open for reading and writing, which
// is where Open waits for the lock.
func waitOpenForWriting(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
			if err != nil || target != path {
				continue
			}
			info, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", fd.Name()))
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(info), "\n") {
				if flags, ok := strings.CutPrefix(line, "flags:"); ok && strings.HasSuffix(strings.TrimSpace(flags), "2") {
					return // O_RDWR
				}
			}
		}
		runtime.Gosched()
	}
	t.Fatal("Open did not open the file for writing within 30s")
}
