package bot

import (
	"testing"

	"github.com/loopbot/loopbot/agent"
)

// TestAutonomyFooter: the card names the level the run works at, a playbook's when it is more
// careful than the channel's.
func TestAutonomyFooter(t *testing.T) {
	tests := []struct {
		st   agent.State
		want string
	}{
		{agent.State{}, ""},
		{agent.State{Autonomy: agent.LevelBold}, " · bold · momentum 1.00"},
		{agent.State{Autonomy: agent.LevelBold, PlaybookLevel: agent.LevelCareful, Momentum: agent.Momentum{Outcomes: "ff"}},
			" · careful (playbook) · momentum 0.75"},
	}
	for _, tt := range tests {
		if got := autonomyFooter(&tt.st); got != tt.want {
			t.Errorf("footer of %+v = %q, want %q", tt.st, got, tt.want)
		}
	}
}
