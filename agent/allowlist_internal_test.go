package agent

import "testing"

// A playbook's level makes a run more careful than its channel, never bolder.
func TestPlaybookLevelIsACeiling(t *testing.T) {
	tests := []struct {
		channel, playbook, want Level
	}{
		{LevelBold, LevelCareful, LevelCareful},
		{LevelBalanced, LevelCareful, LevelCareful},
		{LevelCareful, LevelBold, LevelCareful},
		{LevelBalanced, LevelBold, LevelBalanced},
		{LevelBold, "", LevelBold},
		{LevelBold, "reckless", LevelBold},
		{"", LevelCareful, LevelCareful},
	}
	for _, tt := range tests {
		r := &runner{a: &Agent{cfg: Config{}.Defaults()}, st: &State{Autonomy: tt.channel, PlaybookLevel: tt.playbook}}
		if got := r.level(); got != tt.want {
			t.Errorf("channel %q, playbook %q: level %q, want %q", tt.channel, tt.playbook, got, tt.want)
		}
	}
}
