package main

import (
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// TestTranscriptShowsAutonomy: runs show says the level a run works at and its momentum.
func TestTranscriptShowsAutonomy(t *testing.T) {
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	st := agent.NewState("r1", "fix the build", nil, now)
	st.Autonomy = agent.LevelCareful
	st.Momentum = agent.Momentum{Outcomes: "sfsf"}
	rec := &bot.RunRecord{ID: "r1", Thread: bot.ThreadRef{Platform: "slack", Channel: "C1", Thread: "1.2"}, Status: st.Status, State: st, CreatedAt: now}
	var b strings.Builder
	if err := writeTranscript(&b, rec, nil, bot.NewRedactor(nil)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Autonomy:  careful, momentum 0.75\n") {
		t.Errorf("transcript lacks the level and momentum:\n%s", b.String())
	}
}
