package store_test

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// TestPutRunUsesTheEncodingItWasGiven checks that PutRun writes the bytes EncodeState made
// instead of encoding the state again: a goal changed after the encoding, which the state's
// signs of change do not show, is not what gets stored. (A caller must not do that; the
// test does it only to see which bytes were written.)
func TestPutRunUsesTheEncodingItWasGiven(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "loopbot.db"))
	r := growingRun(3)
	enc, err := db.EncodeState(r.State)
	if err != nil {
		t.Fatal(err)
	}
	if enc.Of() != r.State {
		t.Fatalf("the encoding is of %p, want the state %p", enc.Of(), r.State)
	}
	r.State.Goal = "a goal set after the encoding"
	r.Encoded = enc
	if err := db.Update(t.Context(), func(tx bot.Tx) error { return tx.PutRun(r) }); err != nil {
		t.Fatal(err)
	}
	if got := readRun(t, db, r.ID).State.Goal; got != "read every file" {
		t.Errorf("stored goal %q, want the encoded %q", got, "read every file")
	}
}

// TestPutRunEncodesAStateThatChanged checks that PutRun encodes the state afresh when the
// encoding it was given is stale by one of the signs it checks, or is of another state.
func TestPutRunEncodesAStateThatChanged(t *testing.T) {
	tests := []struct {
		name   string
		change func(r *bot.RunRecord)
	}{
		{"a step later", func(r *bot.RunRecord) { step(r) }},
		{"the step count", func(r *bot.RunRecord) { r.State.Step++ }},
		{"a message more", func(r *bot.RunRecord) {
			r.State.Messages = append(r.State.Messages, agent.Message{Role: agent.RoleUser, Content: "and also"})
		}},
		{"a call fewer", func(r *bot.RunRecord) { r.State.Calls = r.State.Calls[:1] }},
		{"the status", func(r *bot.RunRecord) { r.State.Status = agent.StatusCompleted }},
		{"the update time", func(r *bot.RunRecord) { r.State.UpdatedAt = r.State.UpdatedAt.Add(time.Second) }},
		{"another state", func(r *bot.RunRecord) { st := *r.State; r.State = &st }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openTest(t, filepath.Join(t.TempDir(), "loopbot.db"))
			r := growingRun(3)
			enc, err := db.EncodeState(r.State)
			if err != nil {
				t.Fatal(err)
			}
			tt.change(r)
			// Changed along with the sign, so that a stale encoding shows in the goal
			// even where the sign's own field does not read back (the update time).
			r.State.Goal = "changed"
			r.Encoded = enc
			if err := db.Update(t.Context(), func(tx bot.Tx) error { return tx.PutRun(r) }); err != nil {
				t.Fatal(err)
			}
			got := readRun(t, db, r.ID)
			if !reflect.DeepEqual(got.State, r.State) {
				t.Errorf("stored state differs from the state put:\n got %+v\nwant %+v", got.State, r.State)
			}
		})
	}
}

// readRun reads run id, failing the test if it cannot.
func readRun(t *testing.T, db bot.Store, id string) *bot.RunRecord {
	t.Helper()
	var rec *bot.RunRecord
	if err := db.View(t.Context(), func(tx bot.Tx) error {
		var err error
		rec, err = tx.Run(id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return rec
}

// BenchmarkPutRunWriter measures what a checkpoint's PutRun costs the store's one writer,
// inside a write transaction and without its commit: a run of five steps checkpointed
// again with a new step count, its messages and calls as they were. "in the transaction"
// encodes the state there, as PutRun did before EncodeState; "encoded before" is given the
// encoding its run's goroutine made, as the bot's checkpoint does now.
func BenchmarkPutRunWriter(b *testing.B) {
	const pool = 64
	for _, mode := range []string{"in the transaction", "encoded before"} {
		b.Run(mode, func(b *testing.B) {
			db := openTest(b, filepath.Join(b.TempDir(), "loopbot.db"))
			r := growingRun(5)
			if err := db.Update(b.Context(), func(tx bot.Tx) error { return tx.PutRun(r) }); err != nil {
				b.Fatal(err)
			}
			// States a step apart, so that every put rewrites the record; each is encoded
			// here, outside the measurement, as a run's goroutine would.
			states := make([]*agent.State, pool)
			encs := make([]bot.EncodedState, pool)
			for i := range states {
				st := *r.State
				st.Step = 100 + i
				states[i] = &st
				if mode == "encoded before" {
					enc, err := db.EncodeState(&st)
					if err != nil {
						b.Fatal(err)
					}
					encs[i] = enc
				}
			}
			err := db.Update(b.Context(), func(tx bot.Tx) error {
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					r.State, r.Encoded = states[i%pool], encs[i%pool]
					if err := tx.PutRun(r); err != nil {
						return err
					}
				}
				b.StopTimer()
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
