package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// The web console's view (adapters/web, viewstore.go): rows under a thread and a key,
// numbered in commit order. The suite names the methods here, as the console does, since
// neither package may import the other.

type consoleStore interface {
	PutConsoleRow(ctx context.Context, thread, key string, data []byte) (uint64, error)
	DeleteConsoleRows(ctx context.Context, thread string, keys ...string) (uint64, error)
	ConsoleRows(ctx context.Context, after uint64, fn func(seq, pos uint64, thread, key string, data []byte) error) error
}

// consoleRow is one row as ConsoleRows gives it; Gone marks a tombstone.
type consoleRow struct {
	Seq, Pos    uint64
	Thread, Key string
	Data        string
	Gone        bool
}

func consoleOf(t *testing.T, s bot.Store) consoleStore {
	t.Helper()
	c, ok := s.(consoleStore)
	if !ok {
		t.Fatalf("%T does not keep the console's view", s)
	}
	return c
}

func consoleRows(t *testing.T, c consoleStore, after uint64) []consoleRow {
	t.Helper()
	var out []consoleRow
	err := c.ConsoleRows(t.Context(), after, func(seq, pos uint64, thread, key string, data []byte) error {
		out = append(out, consoleRow{Seq: seq, Pos: pos, Thread: thread, Key: key, Data: string(data), Gone: data == nil})
		return nil
	})
	if err != nil {
		t.Fatalf("console rows after %d: %v", after, err)
	}
	return out
}

func putConsole(t *testing.T, c consoleStore, thread, key, data string) uint64 {
	t.Helper()
	seq, err := c.PutConsoleRow(t.Context(), thread, key, []byte(data))
	if err != nil {
		t.Fatalf("put console row %s/%s: %v", thread, key, err)
	}
	return seq
}

// testConsoleView walks the view through its operations: numbers grow with every put; a
// replaced row moves to the latest number and keeps its position; a reader asking for what
// came after a number gets only that, in order; deleting keys removes them silently;
// forgetting a thread removes its rows and leaves a tombstone a reader sees; the rows outlive
// a reopen, and a second handle reads what the first wrote.
func testConsoleView(t *testing.T, su *suite) {
	s := su.open(t)
	c := consoleOf(t, s)
	// The second handle is opened before the first reopens: it names the store by its first
	// handle.
	var other consoleStore
	if su.second != nil {
		other = consoleOf(t, su.second(t, s))
	}
	if got := consoleRows(t, c, 0); len(got) != 0 {
		t.Fatalf("a new store's console rows: %+v", got)
	}
	s1 := putConsole(t, c, "th-a", "", "thread a")
	s2 := putConsole(t, c, "th-a", "m1", "first")
	s3 := putConsole(t, c, "th-b", "", "thread b")
	s4 := putConsole(t, c, "th-a", "m2", "second")
	if !(s1 < s2 && s2 < s3 && s3 < s4) {
		t.Fatalf("numbers do not grow: %d %d %d %d", s1, s2, s3, s4)
	}
	s5 := putConsole(t, c, "th-a", "m1", "first, edited")
	equal(t, "rows after the second put", consoleRows(t, c, s2), []consoleRow{
		{Seq: s3, Pos: s3, Thread: "th-b", Data: "thread b"},
		{Seq: s4, Pos: s4, Thread: "th-a", Key: "m2", Data: "second"},
		{Seq: s5, Pos: s2, Thread: "th-a", Key: "m1", Data: "first, edited"},
	})
	if _, err := c.DeleteConsoleRows(t.Context(), "th-a", "m2", "missing"); err != nil {
		t.Fatal(err)
	}
	equal(t, "rows after deleting m2", consoleRows(t, c, s3), []consoleRow{
		{Seq: s5, Pos: s2, Thread: "th-a", Key: "m1", Data: "first, edited"},
	})
	if su.reopen != nil {
		s = su.reopen(t, s)
		c = consoleOf(t, s)
	}
	gone, err := c.DeleteConsoleRows(t.Context(), "th-a")
	if err != nil {
		t.Fatal(err)
	}
	if gone <= s5 {
		t.Fatalf("the tombstone's number %d is not past %d", gone, s5)
	}
	want := []consoleRow{
		{Seq: s3, Pos: s3, Thread: "th-b", Data: "thread b"},
		{Seq: gone, Pos: s1, Thread: "th-a", Gone: true},
	}
	equal(t, "rows after forgetting th-a", consoleRows(t, c, 0), want)
	if other != nil {
		equal(t, "rows read by a second handle", consoleRows(t, other, 0), want)
	}
	// A thread forgotten and shown again is a thread again.
	again := putConsole(t, c, "th-a", "", "thread a again")
	equal(t, "rows after th-a came back", consoleRows(t, c, gone), []consoleRow{{Seq: again, Pos: s1, Thread: "th-a", Data: "thread a again"}})
}

// testConsoleViewFollower writes rows from several goroutines (on two handles where the
// backend has them) while a reader follows the view by asking for what came after the last
// number it saw: the reader must see every row, which holds only if a number never becomes
// visible before a smaller one.
func testConsoleViewFollower(t *testing.T, su *suite) {
	s := su.open(t)
	writers := []consoleStore{consoleOf(t, s)}
	if su.second != nil {
		writers = append(writers, consoleOf(t, su.second(t, s)))
	}
	reader := consoleOf(t, s)
	const n = 8
	const each = 10
	done := make(chan struct{})
	seen := map[string]bool{}
	var last uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		for finished := false; !finished; {
			select {
			case <-done:
				finished = true // one more read after the writers ended
			default:
			}
			err := reader.ConsoleRows(t.Context(), last, func(seq, _ uint64, thread, key string, _ []byte) error {
				if seq <= last {
					return fmt.Errorf("row %d after %d", seq, last)
				}
				last = seq
				seen[thread+"/"+key] = true
				return nil
			})
			if err != nil {
				t.Error(err)
				return
			}
		}
	})
	errs := race(n, func(i int) error {
		for j := range each {
			if _, err := writers[i%len(writers)].PutConsoleRow(t.Context(), fmt.Sprintf("th-%d", i), fmt.Sprintf("m%d", j), []byte("x")); err != nil {
				return err
			}
		}
		return nil
	})
	close(done)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var missed []string
	for i := range n {
		for j := range each {
			if k := fmt.Sprintf("th-%d/m%d", i, j); !seen[k] {
				missed = append(missed, k)
			}
		}
	}
	slices.Sort(missed)
	if len(missed) > 0 {
		t.Errorf("the follower missed %d rows: %v", len(missed), missed)
	}
}
