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

// TestStreamFinishedByAnswer posts an answer in a thread with an open stream: a stream that
// shows the start of the answer becomes the answer (the rest appended, the footer and
// buttons under it, stopped, no second message); a stream that does not is deleted and the
// answer posted as usual.
func TestStreamFinishedByAnswer(t *testing.T) {
	ctx := t.Context()
	answer := bot.Message{Kind: bot.KindAnswer, Text: "The answer is 42.", Footer: "Step 3",
		Buttons: []bot.Button{{ID: "rate-1", Label: "Good"}}}
	long := strings.Repeat("A long answer goes on. ", 1500) // 34,500 characters
	for _, tt := range []struct {
		name, streamed, text string
		becomes              bool
	}{
		{"prefix", "The answer ", "", true},
		{"other text", "Something else ", "", false},
		{"longer than one append", long[:20000], long, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			answer := answer
			if tt.text != "" {
				answer.Text = tt.text
			}
			f := newFakeSlack(t)
			a, err := New(Config{BotToken: "xoxb-test", AppToken: "xapp-1-test", APIURL: f.apiURL(), Assistant: true})
			if err != nil {
				t.Fatal(err)
			}
			th := bot.ThreadRef{Platform: platform, Workspace: teamID, Channel: "C1", Thread: rootTS}
			if !a.Streams(th) {
				t.Fatal("a thread of an app with the features does not stream")
			}
			if err := a.StreamText(ctx, bot.Stream{Thread: th, RunID: "r1", User: "U1"}, tt.streamed); err != nil {
				t.Fatal(err)
			}
			ref, err := a.Post(ctx, th, answer)
			if err != nil {
				t.Fatal(err)
			}
			start := f.CallsOf("chat.startStream")
			posts := f.CallsOf("chat.postMessage")
			streams := f.Streams()
			if tt.becomes {
				if len(streams) != 1 || ref.ID != start[0].TS || len(posts) != 0 {
					t.Fatalf("ref %s, streams %+v, %d posts: want the stream to be the answer", ref.ID, streams, len(posts))
				}
				s := streams[0]
				if s.Text != answer.Text || !s.Stopped || !strings.Contains(s.Blocks, "Step 3") || !strings.Contains(s.Blocks, "rate-1") {
					t.Errorf("stream %+v: want the whole answer, stopped, with its footer and button under it", s)
				}
				return
			}
			if len(streams) != 0 || len(f.CallsOf("chat.delete")) != 1 || len(posts) != 1 || ref.ID != posts[0].TS {
				t.Errorf("streams %+v, %d deletes, %d posts: want the stream deleted and the answer posted", streams, len(f.CallsOf("chat.delete")), len(posts))
			}
		})
	}
}
