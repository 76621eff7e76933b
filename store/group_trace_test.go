package store

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime/trace"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// TestGroupCommitTraceRegions writes under an execution trace: the trace names the regions
// of the group commit that go tool trace shows (a caller's wait, a group and its commit), and
// the logs of a group's size and of the pages its commit wrote.
func TestGroupCommitTraceRegions(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "loopbot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("another trace is running: %v", err)
	}
	err = db.Update(context.Background(), func(tx bot.Tx) error {
		return tx.PutAction(&bot.Action{ID: "act-1", Kind: bot.ActionCancel, RunID: "r"})
	})
	trace.Stop()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"store: write", "store: group", "store: commit", "group size", "commit pages"} {
		if !bytes.Contains(buf.Bytes(), []byte(want)) {
			t.Errorf("the trace does not name %q", want)
		}
	}
}
