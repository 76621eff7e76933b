package store_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

func listOutbox(t testing.TB, db bot.Store) []bot.OutboxItem {
	t.Helper()
	var items []bot.OutboxItem
	if err := db.View(t.Context(), func(tx bot.Tx) error {
		var err error
		items, err = tx.Outbox()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return items
}

func putOutboxItems(t testing.TB, db bot.Store, items ...bot.OutboxItem) {
	t.Helper()
	if err := db.Update(t.Context(), func(tx bot.Tx) error {
		for _, it := range items {
			if err := tx.PutOutbox(it); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestOutboxSeesAnItemPutAgain checks that an item put again under its key, as a card edit
// is, lists as put the second time, though the first was listed (and kept decoded) before.
func TestOutboxSeesAnItemPutAgain(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "loopbot.db"))
	it := bot.OutboxItem{Key: "card/run-1", Kind: bot.OutboxCard, RunID: "run-1", Thread: bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}, CreatedAt: time.Unix(100, 0).UTC()}
	putOutboxItems(t, db, it)
	if got := listOutbox(t, db); len(got) != 1 || got[0].Attempts != 0 {
		t.Fatalf("first listing: %+v", got)
	}
	it.Attempts, it.Text = 3, "again"
	putOutboxItems(t, db, it)
	if got := listOutbox(t, db); len(got) != 1 || got[0].Attempts != 3 || got[0].Text != "again" {
		t.Errorf("second listing: %+v, want the item as put again", got)
	}
}

// TestOutboxItemsAreCopies checks that a caller changing a listed item's buttons changes
// nothing the next listing returns.
func TestOutboxItemsAreCopies(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "loopbot.db"))
	putOutboxItems(t, db, bot.OutboxItem{Key: "memory/C1", Kind: bot.OutboxMemory, Thread: bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"},
		Actions: []string{"act-1", "act-2"}, CreatedAt: time.Unix(100, 0).UTC()})
	first := listOutbox(t, db)
	first[0].Actions[0] = "changed by the caller"
	if got := listOutbox(t, db); got[0].Actions[0] != "act-1" {
		t.Errorf("second listing's actions %q, want them as stored", got[0].Actions)
	}
}

// BenchmarkOutbox lists an outbox of 1000 status cards, as the dispatcher does on every pass
// while a thousand runs go: "unchanged", none of them changed since the listing before;
// "one changed", one card put again before each listing (not measured), as in the
// makespan scenario, where some run checkpoints between any two passes; "a tenth put
// again", a hundred cards put again at a new time before each listing, as checkpoints put
// them; "shuffled", the
// cards' times in another order than their keys, as runs that checkpoint at their own pace
// put them, so that listing them oldest first moves them.
func BenchmarkOutbox(b *testing.B) {
	for _, mode := range []string{"unchanged", "one changed", "a tenth put again", "shuffled"} {
		b.Run(mode, func(b *testing.B) {
			db := openTest(b, filepath.Join(b.TempDir(), "loopbot.db"))
			var items []bot.OutboxItem
			for i := range 1000 {
				at := i
				if mode == "shuffled" {
					at = i * 7919 % 1000 // a permutation: 7919 is prime
				}
				items = append(items, bot.OutboxItem{Key: fmt.Sprintf("card/run-%04d", i), Kind: bot.OutboxCard, RunID: fmt.Sprintf("run-%04d", i),
					Thread: bot.ThreadRef{Platform: "slack", Workspace: "T1", Channel: fmt.Sprintf("C%04d", i), Thread: "1740830400.000100"}, CreatedAt: time.Unix(int64(at), 0).UTC()})
			}
			putOutboxItems(b, db, items...)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				switch mode {
				case "one changed":
					b.StopTimer()
					it := items[n%len(items)]
					n++
					it.Attempts = n
					putOutboxItems(b, db, it)
					b.StartTimer()
				case "a tenth put again":
					b.StopTimer()
					again := make([]bot.OutboxItem, 0, 100)
					for range 100 {
						it := items[n%len(items)]
						n++
						it.CreatedAt = it.CreatedAt.Add(time.Duration(n) * time.Millisecond)
						again = append(again, it)
					}
					putOutboxItems(b, db, again...)
					b.StartTimer()
				}
				if got := listOutbox(b, db); len(got) != 1000 {
					b.Fatalf("%d items", len(got))
				}
			}
		})
	}
}

// TestAppendOutboxReusesTheSlice checks that AppendOutbox lists what Outbox lists into the
// array it is given, whatever that held before.
func TestAppendOutboxReusesTheSlice(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "loopbot.db"))
	for i := range 3 {
		putOutboxItems(t, db, bot.OutboxItem{Key: fmt.Sprintf("card/run-%d", i), Kind: bot.OutboxCard, RunID: fmt.Sprintf("run-%d", i),
			Thread: bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}, CreatedAt: time.Unix(int64(100-i), 0).UTC()})
	}
	want := listOutbox(t, db)
	dst := make([]bot.OutboxItem, 5, 16)
	for i := range dst {
		dst[i] = bot.OutboxItem{Key: "stale"}
	}
	var got []bot.OutboxItem
	if err := db.View(t.Context(), func(tx bot.Tx) error {
		a, ok := tx.(bot.OutboxAppender)
		if !ok {
			t.Fatal("the bbolt store's transaction is not an OutboxAppender")
		}
		var err error
		got, err = a.AppendOutbox(dst[:0])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("AppendOutbox listed %+v, want %+v", got, want)
	}
	if &got[0] != &dst[0] {
		t.Error("AppendOutbox did not list into the array it was given")
	}
}

// TestOutboxHoldsTheItemAsListed checks that the outbox tells an item it holds as it was
// listed from one changed, put again or taken out since.
func TestOutboxHoldsTheItemAsListed(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "loopbot.db"))
	card := bot.OutboxItem{Key: "card/run-1", Kind: bot.OutboxCard, RunID: "run-1", Thread: bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}, CreatedAt: time.Unix(100, 5).UTC()}
	putOutboxItems(t, db, card)
	listed := listOutbox(t, db)[0]
	holds := func(it bot.OutboxItem) bool {
		t.Helper()
		var held bool
		if err := db.View(t.Context(), func(tx bot.Tx) error {
			var err error
			held, err = tx.(bot.OutboxHolder).OutboxHolds(it)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return held
	}
	if !holds(listed) {
		t.Error("the outbox does not hold the item as it was listed")
	}
	changed := listed
	changed.Attempts++
	if holds(changed) {
		t.Error("the outbox holds an item with another attempt count")
	}
	again := card
	again.CreatedAt = card.CreatedAt.Add(time.Millisecond)
	putOutboxItems(t, db, again)
	if holds(listed) {
		t.Error("the outbox holds the item as listed after it was put again")
	}
	if err := db.Update(t.Context(), func(tx bot.Tx) error { return tx.DeleteOutbox(card.Key) }); err != nil {
		t.Fatal(err)
	}
	if holds(again) {
		t.Error("the outbox holds an item taken out")
	}
}

// TestOutboxListsOldestFirstThenByKey lists fifty items whose times are out of their keys'
// order, ten of each time: oldest first, and items of one time in the order of their keys.
func TestOutboxListsOldestFirstThenByKey(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "loopbot.db"))
	var items []bot.OutboxItem
	for i := range 50 {
		items = append(items, bot.OutboxItem{Key: fmt.Sprintf("notice/%02d", i), Kind: bot.OutboxNotice, Text: "hello",
			Thread: bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T1"}, CreatedAt: time.Unix(int64(i*3%5), 0).UTC()})
	}
	putOutboxItems(t, db, items...)
	got := listOutbox(t, db)
	if len(got) != len(items) {
		t.Fatalf("%d items listed, want %d", len(got), len(items))
	}
	for i := 1; i < len(got); i++ {
		a, b := got[i-1], got[i]
		if c := a.CreatedAt.Compare(b.CreatedAt); c > 0 || c == 0 && a.Key > b.Key {
			t.Fatalf("%s (%s) listed before %s (%s)", a.Key, a.CreatedAt, b.Key, b.CreatedAt)
		}
	}
}
