package store_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
	"github.com/loopbot/loopbot/store/storetest"
)

// openTest opens the database at path and, when the test ends, closes it and runs the
// consistency check on the file as it was left.
func openTest(t testing.TB, path string) *store.DB {
	t.Helper()
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		checkFile(t, path)
	})
	return db
}

// checkFile opens path afresh and runs Check. The test's context is already cancelled
// when cleanups run, hence the background one.
func checkFile(t testing.TB, path string) {
	t.Helper()
	db, err := store.Open(path, store.WithLockTimeout(100*time.Millisecond))
	if err != nil {
		t.Errorf("reopen for check: %v", err)
		return
	}
	defer db.Close()
	if err := db.Check(context.Background()); err != nil {
		t.Error(err)
	}
}

func TestConformance(t *testing.T) {
	open := func(t *testing.T) bot.Store {
		return openTest(t, filepath.Join(t.TempDir(), "loopbot.db"))
	}
	reopen := func(t *testing.T, s bot.Store) bot.Store {
		db := s.(*store.DB)
		if err := db.Close(); err != nil {
			t.Fatalf("close before reopen: %v", err)
		}
		return openTest(t, db.Path())
	}
	storetest.Run(t, open, storetest.WithReopen(reopen), storetest.WithoutSecondHandle(
		"bbolt's file lock admits one handle per file: one process owns the store, and a second Open fails with ErrLocked (TestOpenLockedInProcess)"))
}

func TestOpenLockedInProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopbot.db")
	first := openTest(t, path)

	// bbolt's lock is an flock, which a second open file in the same process also waits on.
	_, err := store.Open(path, store.WithLockTimeout(50*time.Millisecond))
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second Open: got %v, want ErrLocked", err)
	}
	if want := "database is locked by another loopbot process: " + path; err.Error() != want {
		t.Errorf("second Open: message %q, want %q", err, want)
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, err := store.Open(path, store.WithLockTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatalf("Open after the first closed: %v", err)
	}
	second.Close()
}

// holdEnv makes the test binary, started by TestOpenLockedByAnotherProcess, hold the lock
// of the file it names until its stdin closes.
const holdEnv = "LOOPBOT_STORE_TEST_HOLD"

func TestOpenLockedByAnotherProcess(t *testing.T) {
	if path := os.Getenv(holdEnv); path != "" {
		db, err := store.Open(path)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		db.Close()
		os.Exit(0)
	}

	path := filepath.Join(t.TempDir(), "loopbot.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenLockedByAnotherProcess$")
	cmd.Env = append(os.Environ(), holdEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("holder process: %v", err)
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("holder process said %q, %v", line, err)
	}

	_, err = store.Open(path, store.WithLockTimeout(100*time.Millisecond))
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("Open while another process holds the file: got %v, want ErrLocked", err)
	}
	if want := "database is locked by another loopbot process: " + path; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

func TestOpenLockTimeoutMustBePositive(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		path := filepath.Join(t.TempDir(), "loopbot.db")
		if db, err := store.Open(path, store.WithLockTimeout(d)); err == nil {
			db.Close()
			t.Errorf("Open with lock timeout %s: no error", d)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Open with lock timeout %s left a file: %v", d, err)
		}
	}
}

func TestOpenCreatesPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "loopbot")
	path := filepath.Join(dir, "loopbot.db")
	openTest(t, path)
	tests := []struct {
		path string
		want os.FileMode
	}{
		{filepath.Dir(dir), 0o700 | os.ModeDir},
		{dir, 0o700 | os.ModeDir},
		{path, 0o600},
	}
	for _, tt := range tests {
		fi, err := os.Stat(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != tt.want {
			t.Errorf("%s: mode %s, want %s", tt.path, fi.Mode(), tt.want)
		}
	}
}

// rawVersion reads the schema version straight from the file.
func rawVersion(t *testing.T, path string) string {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var v string
	err = bdb.View(func(btx *bolt.Tx) error {
		b := btx.Bucket([]byte("meta"))
		if b == nil {
			return errors.New("no meta bucket")
		}
		v = string(b.Get([]byte("schema_version")))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func setRawVersion(t *testing.T, path, version string) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	err = bdb.Update(func(btx *bolt.Tx) error {
		return btx.Bucket([]byte("meta")).Put([]byte("schema_version"), []byte(version))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSchemaVersion(t *testing.T) {
	tests := []struct {
		name    string
		version string
		wantErr string // "" when Open must succeed
	}{
		{"current", "3", ""},
		{"older, migrated", "2", ""},
		{"oldest, migrated", "1", ""},
		{"newer", "4", "unsupported database schema: version 4 is newer than this loopbot supports (3)"},
		{"zero", "0", "unsupported database schema: version 0 is not valid"},
		{"not a number", `"one"`, `unsupported database schema: version "\"one\"" is not a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "loopbot.db")
			db, err := store.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			if got := rawVersion(t, path); got != "3" {
				t.Fatalf("a new file has schema version %q, want 3", got)
			}
			setRawVersion(t, path, tt.version)

			db, err = store.Open(path)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				db.Close()
				if got := rawVersion(t, path); got != "3" {
					t.Errorf("opened file has version %q, want 3", got)
				}
				return
			}
			if err == nil {
				db.Close()
				t.Fatal("Open: no error")
			}
			if !errors.Is(err, store.ErrSchema) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
				t.Errorf("Open: %q, want ErrSchema with %q and the path", err, tt.wantErr)
			}
			if got := rawVersion(t, path); got != tt.version {
				t.Errorf("refused file now has version %q, want it left at %q", got, tt.version)
			}
		})
	}
}

// TestTxInvalidAfterFn keeps the Tx past its function, which the Store forbids: every call
// must fail with ErrTxClosed rather than touch a finished bbolt transaction.
func TestTxInvalidAfterFn(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "loopbot.db"))
	var fromUpdate, fromView bot.Tx
	if err := db.Update(t.Context(), func(tx bot.Tx) error { fromUpdate = tx; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := db.View(t.Context(), func(tx bot.Tx) error { fromView = tx; return nil }); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		call func(tx bot.Tx) error
	}{
		{"Run", func(tx bot.Tx) error { _, err := tx.Run("run-1"); return err }},
		{"PutRun", func(tx bot.Tx) error { return tx.PutRun(&bot.RunRecord{ID: "run-1"}) }},
		{"Runs", func(tx bot.Tx) error { _, err := tx.Runs(bot.RunFilter{}); return err }},
		{"RunIDs", func(tx bot.Tx) error { _, err := tx.RunIDs(bot.RunFilter{}); return err }},
		{"RunHeader", func(tx bot.Tx) error { _, err := tx.RunHeader("run-1"); return err }},
		{"Approvals", func(tx bot.Tx) error { _, err := tx.Approvals(""); return err }},
		{"AppendAudit", func(tx bot.Tx) error { return tx.AppendAudit(bot.AuditEntry{At: time.Now()}) }},
		{"DeleteOutbox", func(tx bot.Tx) error { return tx.DeleteOutbox("k") }},
	}
	for _, c := range calls {
		for name, tx := range map[string]bot.Tx{"update": fromUpdate, "view": fromView} {
			if err := c.call(tx); !errors.Is(err, store.ErrTxClosed) {
				t.Errorf("%s on a %s tx after its function: got %v, want ErrTxClosed", c.name, name, err)
			}
		}
	}
}

func TestPutRun(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "loopbot.db"))
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

	foreign := &bot.RunRecord{ID: "run-1", State: agent.NewState("run-2", "goal", nil, now)}
	err := db.Update(t.Context(), func(tx bot.Tx) error { return tx.PutRun(foreign) })
	if err == nil || !strings.Contains(err.Error(), `state belongs to run "run-2"`) {
		t.Errorf("PutRun with another run's state: got %v", err)
	}

	// The stored status follows the state, but the caller's record is left as it was.
	r := &bot.RunRecord{ID: "run-1", Status: agent.StatusFailed, State: agent.NewState("run-1", "goal", nil, now)}
	if err := db.Update(t.Context(), func(tx bot.Tx) error { return tx.PutRun(r) }); err != nil {
		t.Fatal(err)
	}
	if r.Status != agent.StatusFailed {
		t.Errorf("PutRun changed its argument's status to %q", r.Status)
	}

	err = db.View(t.Context(), func(tx bot.Tx) error { _, err := tx.Runs(bot.RunFilter{Limit: -1}); return err })
	if err == nil {
		t.Error("Runs with a negative limit: no error")
	}
	err = db.View(t.Context(), func(tx bot.Tx) error { _, err := tx.RunIDs(bot.RunFilter{Limit: -1}); return err })
	if err == nil {
		t.Error("RunIDs with a negative limit: no error")
	}

	// The status index ends a status with a NUL byte, so one inside a status is refused.
	odd := &bot.RunRecord{ID: "run-3", Status: "queued\x00running"}
	err = db.Update(t.Context(), func(tx bot.Tx) error { return tx.PutRun(odd) })
	if err == nil || !strings.Contains(err.Error(), "contains a NUL byte") {
		t.Errorf("PutRun with a NUL in the status: got %v", err)
	}
}

// writeSchema1 turns the file at path, written by this package, into the layout of schema
// version 1: the same runs and run_ids, without run_heads and runs_by_status.
func writeSchema1(t *testing.T, path string) {
	t.Helper()
	writeOldSchema(t, path, 1)
}

// writeOldSchema turns the file at path into one of an older schema version: up to version
// 2 a run's messages and calls were inside its record, and version 1 had no run heads and
// no status index.
func writeOldSchema(t *testing.T, path string, version int) {
	t.Helper()
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	full := map[string][]byte{}
	err = db.View(t.Context(), func(tx bot.Tx) error {
		runs, err := tx.Runs(bot.RunFilter{})
		for _, r := range runs {
			data, err := json.Marshal(r)
			if err != nil {
				return err
			}
			full[r.ID] = data
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	err = bdb.Update(func(btx *bolt.Tx) error {
		ids, runs := btx.Bucket([]byte("run_ids")), btx.Bucket([]byte("runs"))
		for id, data := range full {
			if err := runs.Put(ids.Get([]byte(id)), data); err != nil {
				return err
			}
		}
		errs := []error{btx.DeleteBucket([]byte("run_items"))}
		if version == 1 {
			errs = append(errs, btx.DeleteBucket([]byte("run_heads")), btx.DeleteBucket([]byte("runs_by_status")))
		}
		return errors.Join(append(errs, btx.Bucket([]byte("meta")).Put([]byte("schema_version"), []byte(strconv.Itoa(version))))...)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOpenMigratesSchema1 opens a file of schema version 1, which had no run heads and no
// status index: Open must build both from the runs, so that listing by status, by thread and
// run headers work at once, and later status changes keep them right.
func TestOpenMigratesSchema1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopbot.db")
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	threadA := bot.ThreadRef{Platform: "slack", Channel: "C1", Thread: "1"}
	threadB := bot.ThreadRef{Platform: "web", Channel: "console", Thread: "2"}
	put := func(db *store.DB, id string, thread bot.ThreadRef, status agent.Status) {
		t.Helper()
		err := db.Update(t.Context(), func(tx bot.Tx) error {
			r, err := tx.Run(id)
			if errors.Is(err, bot.ErrNotFound) {
				r = &bot.RunRecord{ID: id, Thread: thread, State: agent.NewState(id, "goal", nil, now), CreatedAt: now}
			} else if err != nil {
				return err
			}
			r.State.Status = status
			return tx.PutRun(r)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// IDs against creation order, statuses changed after creation.
	put(db, "run-d", threadA, agent.StatusQueued)
	put(db, "run-c", threadB, agent.StatusQueued)
	put(db, "run-b", threadA, agent.StatusQueued)
	put(db, "run-a", threadB, agent.StatusQueued)
	put(db, "run-d", threadA, agent.StatusCompleted)
	put(db, "run-c", threadB, agent.StatusRunning)
	put(db, "run-a", threadB, agent.StatusRunning)
	db.Close()
	writeSchema1(t, path)

	db, err = store.Open(path)
	if err != nil {
		t.Fatalf("Open of a version 1 file: %v", err)
	}
	if err := db.Check(t.Context()); err != nil {
		t.Errorf("Check after the migration: %v", err)
	}
	db.Close()
	if got := rawVersion(t, path); got != "3" {
		t.Errorf("migrated file has version %q, want 3", got)
	}

	db = openTest(t, path)
	list := func(f bot.RunFilter) []string {
		t.Helper()
		var got []string
		err := db.View(t.Context(), func(tx bot.Tx) error {
			var err error
			got, err = tx.RunIDs(f)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	active := []agent.Status{agent.StatusQueued, agent.StatusRunning}
	tests := []struct {
		name   string
		filter bot.RunFilter
		want   []string
	}{
		{"active", bot.RunFilter{Statuses: active}, []string{"run-c", "run-b", "run-a"}},
		{"running", bot.RunFilter{Statuses: []agent.Status{agent.StatusRunning}}, []string{"run-c", "run-a"}},
		{"completed", bot.RunFilter{Statuses: []agent.Status{agent.StatusCompleted}}, []string{"run-d"}},
		{"thread", bot.RunFilter{Thread: &threadB}, []string{"run-c", "run-a"}},
		{"all", bot.RunFilter{}, []string{"run-d", "run-c", "run-b", "run-a"}},
	}
	for _, tt := range tests {
		if got := list(tt.filter); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s after the migration: %v, want %v", tt.name, got, tt.want)
		}
	}
	err = db.View(t.Context(), func(tx bot.Tx) error {
		h, err := tx.RunHeader("run-c")
		if err != nil {
			return err
		}
		if h.Status != agent.StatusRunning || h.Thread != threadB || h.State != nil {
			t.Errorf("header of run-c after the migration: %+v", h)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	put(db, "run-c", threadB, agent.StatusFailed)
	if got, want := list(bot.RunFilter{Statuses: active}), []string{"run-b", "run-a"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("active after a status change: %v, want %v", got, want)
	}
}

// TestOpenMigrationFailureLeavesFile opens a version 1 file with a run that does not decode:
// the migration fails, and the file must be left as it was, still version 1.
func TestOpenMigrationFailureLeavesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopbot.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	writeSchema1(t, path)
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(btx *bolt.Tx) error {
		return btx.Bucket([]byte("runs")).Put([]byte{0, 0, 0, 0, 0, 0, 0, 1}, []byte("{not json"))
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	db, err = store.Open(path)
	if err == nil {
		db.Close()
		t.Fatal("Open of a file whose migration fails: no error")
	}
	if !strings.Contains(err.Error(), "migrate schema 1 to 2") {
		t.Errorf("Open: %v, want it to say the migration failed", err)
	}
	if got := rawVersion(t, path); got != "1" {
		t.Errorf("file has version %q after a failed migration, want 1", got)
	}
}

func TestAuditRefusesTimesOutsideKeyRange(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "loopbot.db"))
	tests := []struct {
		at   time.Time
		ok   bool
		name string
	}{
		{time.Time{}, false, "zero time"},
		{time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), false, "before 1678"},
		{time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), false, "after 2262"},
		{time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), true, "before 1970"},
	}
	for _, tt := range tests {
		err := db.Update(t.Context(), func(tx bot.Tx) error {
			return tx.AppendAudit(bot.AuditEntry{At: tt.at, Action: "approve", RunID: "run-1"})
		})
		if (err == nil) != tt.ok {
			t.Errorf("%s: AppendAudit returned %v", tt.name, err)
		}
	}
}

// runKey is the key in runs of run id, read from run_ids.
func runKey(btx *bolt.Tx, id string) []byte {
	return append([]byte(nil), btx.Bucket([]byte("run_ids")).Get([]byte(id))...)
}

// TestCheckFindsBrokenIndexes damages the index buckets behind the store's back: Check runs
// after every test, so it must be able to fail.
func TestCheckFindsBrokenIndexes(t *testing.T) {
	expiryKey := func(at time.Time, id string) []byte {
		b := make([]byte, 8, 8+len(id))
		n := uint64(at.UnixNano()) ^ (1 << 63)
		for i := range 8 {
			b[7-i] = byte(n >> (8 * i))
		}
		return append(b, id...)
	}
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		damage func(btx *bolt.Tx) error
		want   string
	}{
		{"run index entry lost", func(btx *bolt.Tx) error {
			return btx.Bucket([]byte("run_ids")).Delete([]byte("run-1"))
		}, "2 runs but 1 run index entries"},
		{"run index names a missing key", func(btx *bolt.Tx) error {
			return btx.Bucket([]byte("run_ids")).Put([]byte("run-9"), []byte{0, 0, 0, 0, 0, 0, 0, 99})
		}, "run run-9: index names missing key"},
		{"run index names another run", func(btx *bolt.Tx) error {
			ids := btx.Bucket([]byte("run_ids"))
			return ids.Put([]byte("run-1"), append([]byte(nil), ids.Get([]byte("run-2"))...))
		}, "index names the record of run run-2"},
		{"run head lost", func(btx *bolt.Tx) error {
			return btx.Bucket([]byte("run_heads")).Delete(runKey(btx, "run-1"))
		}, "run run-1 has no head"},
		{"run head of another run", func(btx *bolt.Tx) error {
			heads := btx.Bucket([]byte("run_heads"))
			return heads.Put(runKey(btx, "run-1"), append([]byte(nil), heads.Get(runKey(btx, "run-2"))...))
		}, "run run-1: head"},
		{"stale run head", func(btx *bolt.Tx) error {
			return btx.Bucket([]byte("run_heads")).Put([]byte{0, 0, 0, 0, 0, 0, 0, 99}, []byte(`{"id":"run-9"}`))
		}, "2 runs but 3 run heads"},
		{"status index entry lost", func(btx *bolt.Tx) error {
			return btx.Bucket([]byte("runs_by_status")).Delete(append([]byte("running\x00"), runKey(btx, "run-2")...))
		}, `run run-2 has no status index entry for "running"`},
		{"status index entry names another run", func(btx *bolt.Tx) error {
			return btx.Bucket([]byte("runs_by_status")).Put(append([]byte("queued\x00"), runKey(btx, "run-1")...), []byte("run-2"))
		}, "run run-1: its status index entry names run run-2"},
		{"status index entry for an old status", func(btx *bolt.Tx) error {
			return btx.Bucket([]byte("runs_by_status")).Put(append([]byte("queued\x00"), runKey(btx, "run-2")...), []byte("run-2"))
		}, `status index lists run run-2 as "queued", but it is "running"`},
		{"status index entry names no run", func(btx *bolt.Tx) error {
			return btx.Bucket([]byte("runs_by_status")).Put([]byte("queued\x00\x00\x00\x00\x00\x00\x00\x00\x63"), []byte("run-9"))
		}, "names no run"},
		{"run item lost from the middle", func(btx *bolt.Tx) error {
			return btx.Bucket([]byte("run_items")).Delete(append(runKey(btx, "run-2"), 'm', 0, 0, 0, 1))
		}, "item m2 follows 1 items: the sequence is broken"},
		{"run item of no run", func(btx *bolt.Tx) error {
			return btx.Bucket([]byte("run_items")).Put([]byte{0, 0, 0, 0, 0, 0, 0, 99, 'm', 0, 0, 0, 0}, []byte(`{"role":"user"}`))
		}, "names no run"},
		{"run item that does not decode", func(btx *bolt.Tx) error {
			return btx.Bucket([]byte("run_items")).Put(append(runKey(btx, "run-2"), 'c', 0, 0, 0, 0), []byte(`{"id":`))
		}, "decode run item"},
		{"run item key of another shape", func(btx *bolt.Tx) error {
			return btx.Bucket([]byte("run_items")).Put(append(runKey(btx, "run-2"), 'x', 0, 0, 0, 0), []byte(`{}`))
		}, "is not a run key, a kind and an index"},
		{"claim without expiry entry", func(btx *bolt.Tx) error {
			return btx.Bucket([]byte("event_expiry")).Delete(expiryKey(now.Add(time.Minute), "Ev1"))
		}, "event claim Ev1 has no expiry index entry"},
		{"stale expiry entry", func(btx *bolt.Tx) error {
			return btx.Bucket([]byte("event_expiry")).Put(expiryKey(now, "Ev1"), []byte{})
		}, "1 event claims but 2 expiry index entries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "loopbot.db")
			db, err := store.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			st := agent.NewState("run-2", "goal", nil, now)
			st.Status = agent.StatusRunning
			st.Messages = append(st.Messages, agent.Message{Role: agent.RoleAssistant, Content: "one"}, agent.Message{Role: agent.RoleUser, Content: "two"})
			st.Calls = []agent.CallRecord{{ID: "c1", Name: "shell", Status: agent.CallSucceeded}}
			err = db.Update(t.Context(), func(tx bot.Tx) error {
				return errors.Join(tx.PutRun(&bot.RunRecord{ID: "run-1", Status: agent.StatusQueued}),
					tx.PutRun(&bot.RunRecord{ID: "run-2", State: st}))
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.ClaimEvent(t.Context(), "Ev1", now, time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := db.Check(t.Context()); err != nil {
				t.Fatalf("Check before the damage: %v", err)
			}
			db.Close()

			bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := bdb.Update(tt.damage); err != nil {
				t.Fatal(err)
			}
			bdb.Close()

			db, err = store.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Check(t.Context()); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check: got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// benchRun is a run after ten steps: twenty messages with tool outputs of a few kilobytes,
// a plan, and ten call records.
func benchRun() *bot.RunRecord {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	st := agent.NewState("run-bench", "Find why the nightly build fails and open a fix.", nil, now)
	st.Status = agent.StatusRunning
	output := strings.Repeat("build log line: compiling package ./internal/thing ok\n", 40)
	for i := range 10 {
		id := fmt.Sprintf("call-%d", i)
		args := fmt.Sprintf(`{"path":"internal/pkg%d/file.go","start":1,"end":200}`, i)
		st.Messages = append(st.Messages,
			agent.Message{Role: agent.RoleAssistant, Content: "Let me look at the next file.",
				ToolCalls: []agent.ToolCall{{ID: id, Name: "read_file", Arguments: args}}},
			agent.Message{Role: agent.RoleTool, ToolCallID: id, Name: "read_file", Content: output},
		)
		st.Calls = append(st.Calls, agent.CallRecord{ID: id, Step: i + 1, Name: "read_file", Arguments: args,
			ArgsHash: agent.HashArgs("read_file", args), Risk: agent.RiskSafe, Status: agent.CallSucceeded,
			Output: output, Attempts: 1, StartedAt: now, FinishedAt: now.Add(time.Second), Reported: true})
	}
	st.Messages = st.Messages[:20]
	st.Plan = []agent.PlanItem{{Step: "reproduce", Status: agent.PlanDone}, {Step: "find the cause", Status: agent.PlanInProgress}, {Step: "open a fix", Status: agent.PlanPending}}
	st.Step = 10
	st.Usage = agent.Usage{PromptTokens: 48000, CompletionTokens: 2100, Cost: 0.21, Calls: 10}
	thread := bot.ThreadRef{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: "1740830400.000100"}
	return &bot.RunRecord{ID: "run-bench", Thread: thread, Requester: bot.User{ID: "U1", Name: "ada"},
		State: st, Card: bot.MessageRef{Thread: thread, ID: "1740830401.000200"}, CancelAction: "act-cancel",
		CreatedAt: now, UpdatedAt: now}
}

// BenchmarkPutRun saves a run the way the loop does after every step: one Update with one
// PutRun of the same run, synced to disk on commit.
func BenchmarkPutRun(b *testing.B) {
	db := openTest(b, filepath.Join(b.TempDir(), "loopbot.db"))
	r := benchRun()
	data, err := json.Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	written := db.BytesWritten()
	for b.Loop() {
		r.State.Step++
		if err := db.Update(ctx, func(tx bot.Tx) error { return tx.PutRun(r) }); err != nil {
			b.Fatal(err)
		}
	}
	// Reported after the loop, which resets what was reported before it.
	b.ReportMetric(float64(len(data)), "B/record")
	b.ReportMetric(float64(db.BytesWritten()-written)/float64(b.N), "written-B/op")
}

// BenchmarkActiveRunsAmongHistory lists the runs still going, as the scheduler does whenever
// a run starts or ends, from a store that also holds 10,000 completed runs of benchRun's size
// (about 48 KB each): what it costs must not grow with the history.
func BenchmarkActiveRunsAmongHistory(b *testing.B) {
	const history, active = 10000, 20
	db := openTest(b, filepath.Join(b.TempDir(), "loopbot.db"))
	ctx := context.Background()
	r := benchRun()
	// The active runs are spread through the history, as they would be created between
	// runs that have ended since.
	for i := 0; i < history+active; {
		err := db.Update(ctx, func(tx bot.Tx) error {
			for end := min(i+500, history+active); i < end; i++ {
				r.ID, r.State.RunID, r.State.Status = fmt.Sprintf("run-%05d", i), fmt.Sprintf("run-%05d", i), agent.StatusCompleted
				if i%((history+active)/active) == 0 {
					r.State.Status = agent.StatusRunning
				}
				if err := tx.PutRun(r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	filter := bot.RunFilter{Statuses: []agent.Status{agent.StatusQueued, agent.StatusRunning}}
	b.Run("Runs", func(b *testing.B) {
		for b.Loop() {
			err := db.View(ctx, func(tx bot.Tx) error {
				runs, err := tx.Runs(filter)
				if err == nil && len(runs) != active {
					err = fmt.Errorf("%d active runs, want %d", len(runs), active)
				}
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("RunIDs", func(b *testing.B) {
		for b.Loop() {
			err := db.View(ctx, func(tx bot.Tx) error {
				ids, err := tx.RunIDs(filter)
				if err == nil && len(ids) != active {
					err = fmt.Errorf("%d active runs, want %d", len(ids), active)
				}
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCheckpointRead saves a step the way the bot's checkpoint does: one Update that
// reads the stored run, to keep its other fields and see it has not ended, and puts it back
// with the new state. Reading it with Run decodes the whole stored state; RunHeader reads
// only the head, which is what the bot uses.
func BenchmarkCheckpointRead(b *testing.B) {
	for _, read := range []string{"Run", "RunHeader"} {
		b.Run(read, func(b *testing.B) {
			db := openTest(b, filepath.Join(b.TempDir(), "loopbot.db"))
			ctx := context.Background()
			r := benchRun()
			if err := db.Update(ctx, func(tx bot.Tx) error { return tx.PutRun(r) }); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				r.State.Step++
				err := db.Update(ctx, func(tx bot.Tx) error {
					get := tx.Run
					if read == "RunHeader" {
						get = tx.RunHeader
					}
					rec, err := get(r.ID)
					if err != nil {
						return err
					}
					if rec.Status.Terminal() {
						return fmt.Errorf("run %s has ended", rec.ID)
					}
					rec.State = r.State
					return tx.PutRun(rec)
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCheckpoint is storetest.BenchCheckpoint on a bbolt file.
func BenchmarkCheckpoint(b *testing.B) {
	storetest.BenchCheckpoint(b, openTest(b, filepath.Join(b.TempDir(), "loopbot.db")))
}
