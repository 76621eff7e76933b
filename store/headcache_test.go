package store

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// noReferences reports the first field of t, a type a cached head is copied as, that a copy
// would share with the original: a pointer, slice, map, interface, channel or function.
func noReferences(t reflect.Type, path string) string {
	if t == reflect.TypeFor[time.Time]() {
		return ""
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if bad := noReferences(t.Field(i).Type, path+"."+t.Field(i).Name); bad != "" {
				return bad
			}
		}
		return ""
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return ""
	}
	return path
}

// TestCachedHeadIsTheDecodedHead puts runs and checks that what RunHeader returns from the
// cache is exactly what decoding the stored head gives, and that a head whose bytes decode
// to something else (a local or monotonic time, a string coerced to valid UTF-8) is not kept.
func TestCachedHeadIsTheDecodedHead(t *testing.T) {
	rt := reflect.TypeFor[bot.RunRecord]()
	for i := range rt.NumField() {
		f := rt.Field(i)
		if f.Name == "State" || f.Name == "Encoded" {
			continue // nil in a head
		}
		if bad := noReferences(f.Type, "RunRecord."+f.Name); bad != "" {
			t.Fatalf("%s would be shared by the copies of a cached head", bad)
		}
	}
	db, err := Open(filepath.Join(t.TempDir(), "loopbot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stamp := time.Date(2026, 11, 27, 10, 0, 0, 123456789, time.UTC)
	thread := bot.ThreadRef{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: "1.2"}
	run := func(id string, edit func(r *bot.RunRecord)) *bot.RunRecord {
		st := agent.NewState(id, "a goal", nil, stamp)
		st.Status = agent.StatusRunning
		r := &bot.RunRecord{ID: id, Thread: thread, Requester: bot.User{ID: "U1", Name: "ann <&>"}, State: st,
			Card: bot.MessageRef{Thread: thread, ID: "m1"}, CancelAction: "act", PauseBy: "bob", ReviewsPosted: 2,
			CreatedAt: stamp, UpdatedAt: stamp.Add(time.Second)}
		if edit != nil {
			edit(r)
		}
		return r
	}
	for _, tc := range []struct {
		name string
		rec  *bot.RunRecord
		kept bool
	}{
		{"stamped in UTC", run("r1", nil), true},
		{"zero times and no card", run("r2", func(r *bot.RunRecord) { r.CreatedAt, r.UpdatedAt, r.Card = time.Time{}, time.Time{}, bot.MessageRef{} }), true},
		{"a replacement character as such", run("r3", func(r *bot.RunRecord) { r.Requester.Name = "ann \ufffd" }), true},
		{"a local time", run("r4", func(r *bot.RunRecord) { r.UpdatedAt = stamp.In(time.FixedZone("CET", 3600)) }), false},
		{"a monotonic reading", run("r5", func(r *bot.RunRecord) { r.UpdatedAt = time.Now().UTC().Add(0) }), true},
		{"a monotonic reading kept", run("r6", func(r *bot.RunRecord) { r.UpdatedAt = time.Now() }), false},
		{"invalid UTF-8", run("r7", func(r *bot.RunRecord) { r.Requester.Name = "ann \xff" }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := db.Update(context.Background(), func(tx bot.Tx) error { return tx.PutRun(tc.rec) }); err != nil {
				t.Fatal(err)
			}
			err := db.View(context.Background(), func(btx bot.Tx) error {
				tx := btx.(*tx)
				key, err := tx.runKey(tc.rec.ID)
				if err != nil {
					return err
				}
				data := tx.btx.Bucket(bucketRunHeads).Get(key)
				decoded, err := decode[bot.RunRecord](data, "head")
				if err != nil {
					return err
				}
				cached, kept := db.heads.get(tc.rec.ID, data)
				if kept != tc.kept {
					t.Fatalf("head kept: %t, want %t", kept, tc.kept)
				}
				if kept && !reflect.DeepEqual(cached, decoded) {
					t.Errorf("cached head\n%#v\ndecoded\n%#v", cached, decoded)
				}
				got, err := tx.RunHeader(tc.rec.ID)
				if err != nil {
					return err
				}
				if !reflect.DeepEqual(got, decoded) {
					t.Errorf("RunHeader\n%#v\ndecoded\n%#v", got, decoded)
				}
				got.PauseBy = "changed"
				if again, _ := tx.RunHeader(tc.rec.ID); again.PauseBy != decoded.PauseBy {
					t.Errorf("a change to a returned head reached the next read: %q", again.PauseBy)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRolledBackHeadIsNotRead puts a run's head in a transaction that rolls back: the head
// kept for it then names bytes that are not stored, and RunHeader must give the stored head.
func TestRolledBackHeadIsNotRead(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "loopbot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stamp := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	st := agent.NewState("r1", "a goal", nil, stamp)
	st.Status = agent.StatusRunning
	rec := &bot.RunRecord{ID: "r1", Thread: bot.ThreadRef{Platform: "slack", Channel: "C1", Thread: "1.2"}, State: st,
		CreatedAt: stamp, UpdatedAt: stamp}
	if err := db.Update(context.Background(), func(tx bot.Tx) error { return tx.PutRun(rec) }); err != nil {
		t.Fatal(err)
	}
	errRollBack := errors.New("roll back")
	err = db.Update(context.Background(), func(tx bot.Tx) error {
		again := *rec
		again.PauseBy = "bob"
		again.UpdatedAt = stamp.Add(time.Second)
		if err := tx.PutRun(&again); err != nil {
			return err
		}
		return errRollBack
	})
	if !errors.Is(err, errRollBack) {
		t.Fatalf("the rolled-back write = %v, want %v", err, errRollBack)
	}
	var got *bot.RunRecord
	if err := db.View(context.Background(), func(tx bot.Tx) error {
		got, err = tx.RunHeader("r1")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got.PauseBy != "" || !got.UpdatedAt.Equal(stamp) {
		t.Errorf("RunHeader after a rolled-back put = PauseBy %q, UpdatedAt %v; want the stored head (no pause, %v)", got.PauseBy, got.UpdatedAt, stamp)
	}
}
