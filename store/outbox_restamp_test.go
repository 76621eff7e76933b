package store

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// cachedOf is it as the outbox cache keeps it after decoding its stored bytes.
func cachedOf(t testing.TB, it bot.OutboxItem) (*cachedItem, []byte) {
	t.Helper()
	raw, err := encodeOutboxItem(&it)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decode[bot.OutboxItem](raw, "item")
	if err != nil {
		t.Fatal(err)
	}
	return &cachedItem{raw: raw, item: *got}, raw
}

// TestRestampedIsWhatDecodingGives puts a card's item again at other times, and with other
// changes: an item whose time alone changed is the cached item at the new time, exactly
// what decoding its bytes gives; any other change is left to decoding.
func TestRestampedIsWhatDecodingGives(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 9, 30, 0, 123456789, time.UTC)
	card := bot.OutboxItem{Key: "card/run-1", Kind: bot.OutboxCard, RunID: "run-1", Text: `a "created_at":"2026" text`,
		Thread: bot.ThreadRef{Platform: "slack", Channel: "C1", Thread: "1"}, Actions: []string{"a1"}, CreatedAt: t0}
	c, _ := cachedOf(t, card)
	for _, tt := range []struct {
		name    string
		change  func(it *bot.OutboxItem)
		rewrite func(raw []byte) []byte // the bytes as another writer wrote them
		want    bool
	}{
		{"a later time", func(it *bot.OutboxItem) { it.CreatedAt = t0.Add(time.Second + 7) }, nil, true},
		{"a whole second", func(it *bot.OutboxItem) { it.CreatedAt = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC) }, nil, true},
		{"another zone", func(it *bot.OutboxItem) { it.CreatedAt = t0.In(time.FixedZone("", 3600)) }, nil, true},
		{"the attempts", func(it *bot.OutboxItem) { it.Attempts = 2 }, nil, false},
		{"the time and the text", func(it *bot.OutboxItem) { it.CreatedAt, it.Text = t0.Add(time.Second), "other" }, nil, false},
		{"a mark", func(it *bot.OutboxItem) { it.Sending = &bot.Sending{Owner: "r1", Term: 2} }, nil, false},
		// A time this store would write otherwise (trailing zeros) is left to decoding.
		{"a time written otherwise", func(it *bot.OutboxItem) { it.CreatedAt = time.Date(2026, 11, 27, 10, 0, 0, 500000000, time.UTC) },
			func(raw []byte) []byte { return bytes.Replace(raw, []byte(".5Z"), []byte(".500Z"), 1) }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			it := card
			tt.change(&it)
			_, raw := cachedOf(t, it)
			if tt.rewrite != nil {
				raw = tt.rewrite(raw)
			}
			got, ok := restamped(c, raw)
			if ok != tt.want {
				t.Fatalf("restamped: %v, want %v", ok, tt.want)
			}
			if !ok {
				return
			}
			want, err := decode[bot.OutboxItem](raw, "item")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(&got, want) {
				t.Errorf("restamped item %+v, decoding gives %+v", got, *want)
			}
		})
	}
}

// FuzzRestamped holds restamped to decoding: any item put again at any time gives, when
// restamped takes it, what decoding its bytes gives.
func FuzzRestamped(f *testing.F) {
	f.Add("card/run-1", "card", "run-1", "", int64(1700000000), int64(100000), 0, int64(1700000001), int64(0), 3600, 0)
	f.Add("memory/C1", "memory", "\"created_at\":\"x", "a\"", int64(-62135596800), int64(0), -86399, int64(0), int64(5), 0, 2)
	f.Fuzz(func(t *testing.T, key, kind, runID, text string, sec, nsec int64, offset int, sec2, nsec2 int64, offset2, attempts int) {
		it := bot.OutboxItem{Key: key, Kind: bot.OutboxKind(kind), RunID: runID, Text: text,
			Thread: bot.ThreadRef{Platform: "p", Channel: "c", Thread: "t"}, CreatedAt: time.Unix(sec, nsec).In(time.FixedZone("", offset))}
		raw, err := encodeOutboxItem(&it)
		if err != nil {
			return
		}
		old, err := decode[bot.OutboxItem](raw, "item")
		if err != nil {
			return
		}
		c := &cachedItem{raw: raw, item: *old}
		it.CreatedAt, it.Attempts = time.Unix(sec2, nsec2).In(time.FixedZone("", offset2)), attempts
		raw2, err := encodeOutboxItem(&it)
		if err != nil {
			return
		}
		got, ok := restamped(c, raw2)
		if !ok {
			return
		}
		want, err := decode[bot.OutboxItem](raw2, "item")
		if err != nil {
			t.Fatalf("restamped %s, which does not decode: %v", raw2, err)
		}
		if !reflect.DeepEqual(&got, want) {
			t.Fatalf("restamped %s to %+v, decoding gives %+v", raw2, got, *want)
		}
	})
}
