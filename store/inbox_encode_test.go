package store

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// TestAppendInboxEntryCoversEveryField fills every field of an inbox entry (but the
// history, which encoding/json writes) and checks appendInboxEntry writes what
// encoding/json does: a field added to InboxEntry or Event and not to appendInboxEntry
// fails it, rather than being left out of the stored entry.
func TestAppendInboxEntryCoversEveryField(t *testing.T) {
	var e bot.InboxEntry
	fill(t, reflect.ValueOf(&e).Elem(), "InboxEntry")
	if e.Event.History != nil {
		t.Fatal("History was filled")
	}
	check(t, &e)
	// And each optional field left out on its own.
	v := reflect.ValueOf(&e.Event).Elem()
	for i := range v.NumField() {
		saved := reflect.New(v.Field(i).Type()).Elem()
		saved.Set(v.Field(i))
		v.Field(i).SetZero()
		check(t, &e)
		v.Field(i).Set(saved)
	}
	e.Replica = ""
	check(t, &e)
	// What appendInboxEntry leaves to encoding/json.
	e.Event.History = &bot.History{Messages: []bot.HistoryMessage{{Name: "ann", Text: "hi"}}}
	check(t, &e)
	e.Event.History = nil
	e.Event.At = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := appendInboxEntry(nil, &e); err == nil {
		t.Error("a year encoding/json refuses was written")
	}
	e.Event.At = time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 25*60*60))
	if _, err := appendInboxEntry(nil, &e); err == nil {
		t.Error("a zone encoding/json refuses was written")
	}
}

// fill sets every field reachable from v to a value other than its zero, except a field
// named History.
func fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2026, 11, 27, 6, 0, 0, 123456789, time.FixedZone("x", 3600))))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("v<&>\u2028é\"" + path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(-1700000000123456789 >> (64 - v.Type().Bits()))
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.Name == "History" || !f.IsExported() {
				continue
			}
			fill(t, v.Field(i), path+"."+f.Name)
		}
	default:
		t.Fatalf("%s: fill does not know a %s; teach it, and appendInboxEntry the field", path, v.Kind())
	}
}

// check compares appendInboxEntry's bytes with encoding/json's.
func check(t *testing.T, e *bot.InboxEntry) {
	t.Helper()
	want, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := appendInboxEntry([]byte("x"), e)
	if err != nil {
		t.Fatal(err)
	}
	if string(got[1:]) != string(want) {
		t.Errorf("appendInboxEntry:\n got %s\nwant %s", got[1:], want)
	}
}

// FuzzAppendInboxEntry holds appendInboxEntry to encoding/json on any strings, times and
// flags.
func FuzzAppendInboxEntry(f *testing.F) {
	f.Add(int64(1700000000123456789), "mention", "Ev1", "slack", "T1", "C1", "1700000000.000100", "U1", "", false,
		"check the build <now> & then", "", "", int64(1700000000), int64(100000), 0, false, "")
	f.Add(int64(-1), "action", "action:\x00\x1f\x7f", "", "", "\u2028\u2029", "\xff\xfe", "", "bea", true,
		"\ud7ff\ue000 \"\\/ \b\f\n\r\t", "status", "approve:1", int64(-62135596800), int64(0), -86399, true, "replica-1")
	f.Fuzz(func(t *testing.T, seq int64, kind, id, platform, workspace, channel, thread, user, name string, isBot bool,
		text, command, action string, sec, nsec int64, offset int, direct bool, replica string) {
		e := &bot.InboxEntry{Seq: seq, Replica: replica, Event: bot.Event{
			Kind: bot.EventKind(kind), ID: id,
			Thread: bot.ThreadRef{Platform: platform, Workspace: workspace, Channel: channel, Thread: thread},
			User:   bot.User{ID: user, Name: name, Bot: isBot},
			Text:   text, Command: command, ActionID: action,
			At:     time.Unix(sec, nsec).In(time.FixedZone("z", offset)),
			Direct: direct,
		}}
		if sec == 0 && nsec == 0 {
			e.Event.At = time.Time{}
		}
		want, werr := json.Marshal(e)
		got, err := appendInboxEntry(nil, e)
		if (err == nil) != (werr == nil) {
			t.Fatalf("err %v, encoding/json's %v", err, werr)
		}
		if err == nil && string(got) != string(want) {
			t.Fatalf("appendInboxEntry:\n got %s\nwant %s", got, want)
		}
	})
}

// BenchmarkInboxEntryEncoding is one entry of a burst's Accept, by encoding/json and by
// appendInboxEntry.
func BenchmarkInboxEntryEncoding(b *testing.B) {
	e := &bot.InboxEntry{Seq: 1700000000123456789, Replica: "r1", Event: bot.Event{Kind: bot.EventMention, ID: "Ev0123ABCDEF",
		Thread: bot.ThreadRef{Platform: "slack", Workspace: "T1", Channel: "C123", Thread: "1700000000.000100"},
		User:   bot.User{ID: "U1"}, Text: "check the build", At: time.Unix(1700000000, 100000).UTC()}}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := appendInboxEntry(make([]byte, 0, 320+len(e.Event.Text)), e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
