package store

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// TestAppendOutboxItemCoversEveryField fills every field of an outbox item and checks
// appendOutboxItem writes what encoding/json does, with every field set and with each left
// out on its own: a field added to OutboxItem, ThreadRef or Sending and not to
// appendOutboxItem fails it, rather than being left out of the stored item.
func TestAppendOutboxItemCoversEveryField(t *testing.T) {
	var it bot.OutboxItem
	fillItem(t, reflect.ValueOf(&it).Elem(), "OutboxItem")
	checkItem(t, &it)
	for _, v := range []reflect.Value{reflect.ValueOf(&it).Elem(), reflect.ValueOf(&it.Thread).Elem(), reflect.ValueOf(it.Sending).Elem()} {
		for i := range v.NumField() {
			saved := reflect.New(v.Field(i).Type()).Elem()
			saved.Set(v.Field(i))
			v.Field(i).SetZero()
			checkItem(t, &it)
			v.Field(i).Set(saved)
		}
	}
	it.Actions = []string{}
	checkItem(t, &it)
	// What appendOutboxItem leaves to encoding/json.
	it.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := appendOutboxItem(nil, &it); err == nil {
		t.Error("a year encoding/json refuses was written")
	}
}

// fillItem sets every field reachable from v to a value other than its zero.
func fillItem(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2026, 11, 27, 9, 0, 0, 123456789, time.FixedZone("x", 3600))))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("v<&>\u2028é\"\x00" + path)
	case reflect.Int, reflect.Int64:
		v.SetInt(-1700000000123456789 >> (64 - v.Type().Bits()))
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fillItem(t, v.Index(i), path+"[]")
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillItem(t, v.Elem(), path)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				fillItem(t, v.Field(i), path+"."+f.Name)
			}
		}
	default:
		t.Fatalf("%s: fillItem does not know a %s; teach it, and appendOutboxItem the field", path, v.Kind())
	}
}

// checkItem compares appendOutboxItem's bytes with encoding/json's.
func checkItem(t *testing.T, it *bot.OutboxItem) {
	t.Helper()
	want, err := json.Marshal(it)
	if err != nil {
		t.Fatal(err)
	}
	got, err := appendOutboxItem([]byte("x"), it)
	if err != nil {
		t.Fatal(err)
	}
	if string(got[1:]) != string(want) {
		t.Errorf("appendOutboxItem:\n got %s\nwant %s", got[1:], want)
	}
}

// FuzzAppendOutboxItem holds appendOutboxItem to encoding/json on any strings, times and
// numbers.
func FuzzAppendOutboxItem(f *testing.F) {
	f.Add("card/run-1", "card", "run-1", "", "slack", "T1", "C1", "1700000000.000100", "", "", "", int64(1700000000), int64(100000), 0, 0, false, "", int64(0))
	f.Add("memory/C1", "memory", "", "ap-1", "", "", "\u2028\u2029", "\xff\xfe", "<a & b>", "act-1", "\x00\x1f\x7f", int64(-62135596800), int64(0), -86399, -3, true, "r\"1", int64(-9))
	f.Fuzz(func(t *testing.T, key, kind, runID, approvalID, platform, workspace, channel, thread, text, action1, action2 string,
		sec, nsec int64, offset, attempts int, sending bool, owner string, term int64) {
		it := &bot.OutboxItem{Key: key, Kind: bot.OutboxKind(kind), RunID: runID, ApprovalID: approvalID,
			Thread: bot.ThreadRef{Platform: platform, Workspace: workspace, Channel: channel, Thread: thread}, Text: text,
			CreatedAt: time.Unix(sec, nsec).In(time.FixedZone("z", offset)), Attempts: attempts}
		if action1 != "" || action2 != "" {
			it.Actions = []string{action1, action2}
		}
		if sec == 0 && nsec == 0 {
			it.CreatedAt = time.Time{}
		}
		if sending {
			it.Sending = &bot.Sending{Owner: owner, Term: term}
		}
		want, werr := json.Marshal(it)
		got, err := appendOutboxItem(nil, it)
		if (err == nil) != (werr == nil) {
			t.Fatalf("err %v, encoding/json's %v", err, werr)
		}
		if err == nil && string(got) != string(want) {
			t.Fatalf("appendOutboxItem:\n got %s\nwant %s", got, want)
		}
	})
}

// BenchmarkOutboxItemEncoding is a status card's outbox item, as a checkpoint puts it, by
// encoding/json and by encodeOutboxItem.
func BenchmarkOutboxItemEncoding(b *testing.B) {
	it := &bot.OutboxItem{Key: "card/33ltlk2tm2por1o77imdbqds2nih57al", Kind: bot.OutboxCard, RunID: "33ltlk2tm2por1o77imdbqds2nih57al",
		Thread:    bot.ThreadRef{Platform: "slack", Workspace: "T1", Channel: "C123", Thread: "1700000000.000100"},
		CreatedAt: time.Unix(1700000000, 100000).UTC()}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(it); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeOutboxItem(it); err != nil {
				b.Fatal(err)
			}
		}
	})
}
