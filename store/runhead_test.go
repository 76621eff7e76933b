package store

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// TestStoredStateIsTheStateSplicedIn checks that the state is taken from a record's bytes
// only when the record is the head stored beside it with the state in place of its null,
// and is then exactly the bytes that were spliced in.
func TestStoredStateIsTheStateSplicedIn(t *testing.T) {
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	st := agent.NewState("run-1", `a goal that says "state":null`, nil, now)
	st.Status, st.Step = agent.StatusRunning, 2
	enc, err := encodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	thread := bot.ThreadRef{Platform: "slack", Channel: "C1", Thread: "1"}
	rec := bot.RunRecord{ID: "run-1", Thread: thread, Requester: bot.User{ID: "U1"}, Status: st.Status,
		Card: bot.MessageRef{Thread: thread, ID: "m1"}, CreatedAt: now, UpdatedAt: now}
	headOf := func(r bot.RunRecord) []byte {
		t.Helper()
		h := head(&r)
		data, err := json.Marshal(&h)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	headData := headOf(rec)
	spliced, err := recordData(&rec, headData, enc.rest)
	if err != nil {
		t.Fatal(err)
	}
	bare, err := recordData(&rec, headData, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Records were once encoded whole, with the state last.
	whole, err := json.Marshal(&runWire{RunRecord: &rec, State: enc.rest})
	if err != nil {
		t.Fatal(err)
	}
	later := rec
	later.UpdatedAt = now.Add(time.Hour)
	other := rec
	other.ID = "run-2"
	for _, tt := range []struct {
		name         string
		record, head []byte
		want         string // "" for none
	}{
		{"a record with a state", spliced, headData, string(enc.rest)},
		{"a record without one", bare, headData, "null"},
		{"a record encoded whole", whole, headData, ""},
		{"another head's end", spliced, headOf(later), ""},
		{"another head's start", spliced, headOf(other), ""},
		{"no head", spliced, nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := storedState(tt.record, tt.head)
			if ok != (tt.want != "") || string(got) != tt.want {
				t.Errorf("storedState = %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}

// TestPutRunHeadKeepsTheStoredState puts a head over a record spliced from its head, over
// one encoded whole as records once were, and over one of a run without a state: the run
// reads back with the new head and the state and status it had, and its record is spliced
// from its head again.
func TestPutRunHeadKeepsTheStoredState(t *testing.T) {
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name  string
		whole bool // the record is rewritten as once encoded, with the state last
		state bool
	}{
		{"spliced", false, true},
		{"encoded whole", true, true},
		{"without a state", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(filepath.Join(t.TempDir(), "bot.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			thread := bot.ThreadRef{Platform: "slack", Channel: "C1", Thread: "1"}
			r := &bot.RunRecord{ID: "run-1", Thread: thread, Requester: bot.User{ID: "U1"}, Status: agent.StatusQueued, CreatedAt: now, UpdatedAt: now}
			if tt.state {
				st := agent.NewState("run-1", "look around", nil, now)
				st.Status, st.Step = agent.StatusRunning, 3
				st.Calls = []agent.CallRecord{{ID: "c1", Step: 1, Name: "look", Arguments: "{}", Status: agent.CallSucceeded, Output: "ok"}}
				st.Messages = append(st.Messages, agent.Message{Role: agent.RoleTool, ToolCallID: "c1", Content: "ok"})
				r.State, r.Status = st, st.Status
			}
			if err := db.Update(t.Context(), func(tx bot.Tx) error { return tx.PutRun(r) }); err != nil {
				t.Fatal(err)
			}
			if tt.whole {
				if err := db.bolt.Update(func(btx *bolt.Tx) error {
					key := btx.Bucket(bucketRunIDs).Get([]byte("run-1"))
					rest, err := json.Marshal(splitState(r.State))
					if err != nil {
						return err
					}
					h := head(r)
					data, err := json.Marshal(&runWire{RunRecord: &h, State: rest})
					if err != nil {
						return err
					}
					return btx.Bucket(bucketRuns).Put(key, data)
				}); err != nil {
					t.Fatal(err)
				}
			}
			h := head(r)
			h.Card, h.Status, h.UpdatedAt = bot.MessageRef{Thread: thread, ID: "m9"}, agent.StatusCompleted, now.Add(time.Minute)
			if err := db.Update(t.Context(), func(tx bot.Tx) error { return tx.PutRunHead(&h) }); err != nil {
				t.Fatal(err)
			}
			want := *r
			want.Card, want.UpdatedAt = h.Card, h.UpdatedAt
			if err := db.View(t.Context(), func(tx bot.Tx) error {
				got, err := tx.Run("run-1")
				if err != nil {
					return err
				}
				if !reflect.DeepEqual(got, &want) {
					t.Errorf("run after PutRunHead:\n%+v\nwant\n%+v", got, &want)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := db.bolt.View(func(btx *bolt.Tx) error {
				key := btx.Bucket(bucketRunIDs).Get([]byte("run-1"))
				record, headData := btx.Bucket(bucketRuns).Get(key), btx.Bucket(bucketRunHeads).Get(key)
				if _, ok := storedState(record, headData); !ok {
					t.Errorf("the record put is not its head spliced:\n%s\nhead\n%s", record, headData)
				}
				if !bytes.Contains(headData, []byte(`"id":"m9"`)) {
					t.Errorf("head %s does not hold the new card", headData)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
