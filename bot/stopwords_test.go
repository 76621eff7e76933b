package bot_test

import (
	"strings"
	"testing"
	"testing/synctest"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// Only whole replies that are a control phrase are read as one; anything more is a note.
func TestControlWords(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"stop", bot.WordsStop},
		{"Stop!", bot.WordsStop},
		{"  STOP IT.  ", bot.WordsStop},
		{"stop now!!", bot.WordsStop},
		{"Please stop.", bot.WordsStop},
		{"cancel", bot.WordsStop},
		{"Abort?", bot.WordsStop},
		{"pause", bot.WordsPause},
		{"Wait!", bot.WordsPause},
		{"hold on...", bot.WordsPause},
		{"stop using the cache and retry", bot.WordsNote},
		{"don't stop", bot.WordsNote},
		{"cancel the second migration only", bot.WordsNote},
		{"wait for the build, then deploy", bot.WordsNote},
		{"stopwatch", bot.WordsNote},
		{"", bot.WordsNote},
	}
	for _, tt := range tests {
		if got := bot.ControlWords(tt.text); got != tt.want {
			t.Errorf("ControlWords(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}

// "stop" in the thread of a working run cancels it as the Cancel button does, and the model
// never reads it.
func TestStopWordsCancelAWorkingRun(t *testing.T) {
	bubble(t, func(t *testing.T) {
		slow := &tool{name: "slow", risk: agent.RiskSafe, block: true}
		h := newHarness(t, bot.Config{}, slow)
		h.model.add(use("slow", `{"q":"a"}`), say("should never be asked"))
		res := h.mention(ann, "migrate the database")
		synctest.Wait() // the run is in its blocking tool call
		got := h.event(bot.Event{Kind: bot.EventReply, User: ann, Text: "Stop!"})
		if got.RunID != res.RunID || strings.Contains(got.Notice, "Noted") {
			t.Fatalf("stop mid-run = %+v, want the run %s cancelled, not noted", got, res.RunID)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCancelled)
		if h.model.saw(agent.RoleUser, "Stop") || h.model.saw(agent.RoleUser, "stop") {
			t.Error("the model was sent the stop request")
		}
	})
}

// A stop from someone who may not cancel the run changes nothing, and they are told so, as
// at the Cancel button; their words are not a note either.
func TestStopWordsHonourWhoMayCancel(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h, res := workingRun(t, "done")
		got := h.event(bot.Event{Kind: bot.EventReply, User: eve, Text: "stop"})
		if !strings.HasPrefix(got.Notice, "Only") {
			t.Fatalf("stop from eve = %+v, want the refusal the Cancel button gives", got)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusCompleted)
		if h.model.saw(agent.RoleUser, "stop") {
			t.Error("the model was sent the refused stop request")
		}
	})
}

// A pause request in words pauses the run as the Pause button does, and the model never
// reads it.
func TestPauseWordsAreAnsweredNotNoted(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h, res := workingRun(t, "done")
		got := h.event(bot.Event{Kind: bot.EventReply, User: ann, Text: "Hold on."})
		if got.RunID != res.RunID || got.Notice != "Pausing at the next step." {
			t.Fatalf("pause mid-run = %+v, want the notice that the run pauses", got)
		}
		h.settle()
		h.wantStatus(res.RunID, agent.StatusAwaitingInput)
		if p := h.run(res.RunID).State.Pause; p.Kind != agent.PausePerson {
			t.Fatalf("paused as %+v", p)
		}
		if h.model.saw(agent.RoleUser, "Hold on") {
			t.Error("the model was sent the pause request")
		}
	})
}
