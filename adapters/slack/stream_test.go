package slack

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/loopbot/loopbot/bot"
)

// TestTaskChunksGolden renders the task_update chunks of a run's plan as it changes: the
// first plan, a step done and the next begun, a step renamed and one failed. Only lines that
// changed are sent; titles are plain text with mention markup made inert, and clipped.
func TestTaskChunksGolden(t *testing.T) {
	plans := [][]bot.PlanLine{
		{{Text: "read the logs", Status: "in_progress"}, {Text: "find the cause", Status: "pending"}},
		{{Text: "read the logs", Status: "done"}, {Text: "find the cause", Status: "in_progress"}},
		{{Text: "read the logs", Status: "done"}, {Text: "ask <!here> about it", Status: "failed"}, {Text: strings.Repeat("long step ", 40), Status: "pending"}},
		{{Text: "read the logs", Status: "done"}, {Text: "ask <!here> about it", Status: "failed"}, {Text: strings.Repeat("long step ", 40), Status: "pending"}},
	}
	var steps [][]slack.StreamChunk
	var sent []bot.PlanLine
	for _, p := range plans {
		steps = append(steps, taskChunks(sent, p))
		sent = p
	}
	if len(steps[3]) != 0 {
		t.Errorf("an unchanged plan sends %d chunks, want none", len(steps[3]))
	}
	got, err := json.MarshalIndent(steps, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "stream_task_chunks.golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendering; run go test -update and review the diff:\n%s", path, got)
	}
}
