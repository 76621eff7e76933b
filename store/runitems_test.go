package store_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// growingRun returns a run after steps steps of the loop: each step an assistant message
// with a tool call, the tool's message with a kilobyte of output, and the call's record.
func growingRun(steps int) *bot.RunRecord {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	st := agent.NewState("run-1", "read every file", nil, now)
	st.Status = agent.StatusRunning
	r := &bot.RunRecord{ID: "run-1", Thread: bot.ThreadRef{Platform: "slack", Channel: "C1", Thread: "1"}, State: st, CreatedAt: now}
	for range steps {
		step(r)
	}
	return r
}

// step adds one step to r's state.
func step(r *bot.RunRecord) {
	st := r.State
	st.Step++
	id := fmt.Sprintf("call-%d", st.Step)
	args := fmt.Sprintf(`{"path":"file-%d.txt"}`, st.Step)
	output := strings.Repeat(fmt.Sprintf("line of file %d\n", st.Step), 64)
	st.Messages = append(st.Messages,
		agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: id, Name: "read_file", Arguments: args}}},
		agent.Message{Role: agent.RoleTool, ToolCallID: id, Name: "read_file", Content: output})
	st.Calls = append(st.Calls, agent.CallRecord{ID: id, Step: st.Step, Name: "read_file", Arguments: args,
		Status: agent.CallSucceeded, Output: output, Reported: true})
}

// TestCheckpointBytesDoNotGrowWithTheRun checkpoints a run step by step and compares what
// the file was written for a step early in the run and for one late in it: a store that
// rewrote the whole state would write about ten times more for step 200 than for step 20.
func TestCheckpointBytesDoNotGrowWithTheRun(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "loopbot.db"))
	r := growingRun(0)
	perStep := map[int]int64{}
	for n := 1; n <= 200; n++ {
		step(r)
		before := db.BytesWritten()
		if err := db.Update(t.Context(), func(tx bot.Tx) error { return tx.PutRun(r) }); err != nil {
			t.Fatal(err)
		}
		perStep[n] = db.BytesWritten() - before
	}
	early, late := perStep[20], perStep[200]
	t.Logf("bytes written for step 20: %d, for step 200: %d", early, late)
	if early <= 0 || late > 2*early {
		t.Errorf("step 200 wrote %d bytes, step 20 %d: a checkpoint's cost grows with the run", late, early)
	}
	err := db.View(t.Context(), func(tx bot.Tx) error {
		got, err := tx.Run("run-1")
		if err != nil {
			return err
		}
		if len(got.State.Messages) != 401 || len(got.State.Calls) != 200 || got.State.Calls[199].ID != "call-200" {
			t.Errorf("read back %d messages and %d calls, want 401 and 200", len(got.State.Messages), len(got.State.Calls))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOpenMigratesSchema2 opens a file of schema version 2, whose runs held their messages
// and calls inside their records: Open moves them into run items, and the runs read back
// as they were.
func TestOpenMigratesSchema2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopbot.db")
	want := growingRun(5)
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(t.Context(), func(tx bot.Tx) error { return tx.PutRun(want) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	writeOldSchema(t, path, 2)
	if n := rawRunLen(t, path); n < 5*1024 {
		t.Fatalf("the version 2 record is %d bytes: it does not hold the state's lists", n)
	}

	db, err = store.Open(path)
	if err != nil {
		t.Fatalf("Open of a version 2 file: %v", err)
	}
	if err := db.Check(t.Context()); err != nil {
		t.Errorf("Check after the migration: %v", err)
	}
	err = db.View(t.Context(), func(tx bot.Tx) error {
		got, err := tx.Run("run-1")
		if err != nil {
			return err
		}
		if fmt.Sprint(got.State.Messages) != fmt.Sprint(want.State.Messages) || fmt.Sprint(got.State.Calls) != fmt.Sprint(want.State.Calls) {
			t.Errorf("run after the migration has %d messages and %d calls, want %d and %d",
				len(got.State.Messages), len(got.State.Calls), len(want.State.Messages), len(want.State.Calls))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if got := rawVersion(t, path); got != "3" {
		t.Errorf("migrated file has version %q, want 3", got)
	}
	if n := rawRunLen(t, path); n > 2048 {
		t.Errorf("the migrated record is %d bytes: the state's lists are still inside it", n)
	}
}

// rawRunLen is the length of run-1's record in the runs bucket.
func rawRunLen(t *testing.T, path string) int {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	n := 0
	err = bdb.View(func(btx *bolt.Tx) error {
		n = len(btx.Bucket([]byte("runs")).Get(runKey(btx, "run-1")))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
