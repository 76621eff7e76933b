package agent

import (
	"strings"
	"testing"
)

// TestNeedsPerson is the level x risk table: which calls ask at which level, with the run's
// momentum full or low. Confirm and dangerous ask at every level whatever the momentum; a
// level decides only about safe and cautious calls.
func TestNeedsPerson(t *testing.T) {
	safe := Assessment{Risk: RiskSafe}
	fetch := Assessment{Risk: RiskSafe, Reads: "https://x.example/page"}
	cautious := Assessment{Risk: RiskCautious}
	confirm := Assessment{Risk: RiskConfirm}
	dangerous := Assessment{Risk: RiskDangerous}
	const full, low, lowest = 1.0, 0.375, 0.125
	tests := []struct {
		level    Level
		kind     callKind
		as       Assessment
		momentum float64
		want     bool
		why      string // part of the reason, when the call asks for a level's sake
	}{
		// careful
		{LevelCareful, kindRead, safe, full, false, ""},
		{LevelCareful, kindRead, fetch, full, true, "reads from outside"},
		{LevelCareful, kindRead, cautious, full, false, ""},
		{LevelCareful, kindWrite, cautious, full, true, "changes the workspace"},
		{LevelCareful, kindExecute, cautious, full, true, "runs a command"},
		{LevelCareful, kindExecute, safe, full, false, ""},
		{LevelCareful, kindRead, cautious, 0.625, true, "momentum is low"},
		{LevelCareful, kindRead, cautious, 0.75, false, ""},
		{LevelCareful, kindWrite, confirm, full, true, ""},
		{LevelCareful, kindExecute, dangerous, full, true, ""},
		// balanced
		{LevelBalanced, kindRead, safe, full, false, ""},
		{LevelBalanced, kindRead, fetch, full, false, ""},
		{LevelBalanced, kindWrite, cautious, full, false, ""},
		{LevelBalanced, kindExecute, cautious, full, false, ""},
		{LevelBalanced, kindWrite, cautious, 0.5, false, ""},
		{LevelBalanced, kindWrite, cautious, low, true, "momentum is low"},
		{LevelBalanced, kindExecute, cautious, low, true, "momentum is low"},
		{LevelBalanced, kindRead, safe, lowest, false, ""},
		{LevelBalanced, kindWrite, confirm, full, true, ""},
		{LevelBalanced, kindExecute, dangerous, full, true, ""},
		// bold
		{LevelBold, kindRead, fetch, full, false, ""},
		{LevelBold, kindWrite, cautious, low, false, ""},
		{LevelBold, kindWrite, cautious, 0.25, true, "momentum is low"},
		{LevelBold, kindExecute, cautious, low, false, ""},
		{LevelBold, kindExecute, cautious, lowest, true, "momentum is low"},
		{LevelBold, kindWrite, cautious, 0, true, "momentum is low"},
		{LevelBold, kindRead, confirm, full, true, ""},
		{LevelBold, kindWrite, confirm, full, true, ""},
		{LevelBold, kindExecute, confirm, full, true, ""},
		{LevelBold, kindRead, dangerous, full, true, ""},
		{LevelBold, kindExecute, dangerous, full, true, ""},
		{LevelBold, kindWrite, dangerous, full, true, ""},
		// An unknown level is careful.
		{Level("reckless"), kindWrite, cautious, full, true, "changes the workspace"},
		// A risk out of range asks.
		{LevelBold, kindRead, Assessment{Risk: 0}, full, true, ""},
		{LevelBold, kindRead, Assessment{Risk: 9}, full, true, ""},
	}
	for _, tt := range tests {
		ask, why := needsPerson(tt.level, tt.kind, tt.as, tt.momentum, false)
		if ask != tt.want || !strings.Contains(why, tt.why) {
			t.Errorf("%s, kind %d, %s, momentum %.2f: ask %v (%q), want %v (%q)", tt.level, tt.kind, tt.as.Risk, tt.momentum, ask, why, tt.want, tt.why)
		}
	}
	// confirm_cautious asks about cautious calls at every level.
	for _, lv := range Levels {
		if ask, _ := needsPerson(lv, kindWrite, cautious, full, true); !ask {
			t.Errorf("%s with confirm_cautious let a cautious call run", lv)
		}
	}
	// A level whose reads are not automatic asks about them (no built-in level is so).
	levelConfigs["test-paranoid"] = LevelConfig{}
	t.Cleanup(func() { delete(levelConfigs, "test-paranoid") })
	if ask, _ := needsPerson("test-paranoid", kindRead, safe, full, false); !ask {
		t.Error("a level without AutoReads let a read run")
	}
}

// TestLevelsNeverLiftMomentum checks what holds for every level: a lower momentum never asks
// less, and a bolder level never asks more than a more careful one.
func TestLevelsNeverLiftMomentum(t *testing.T) {
	risks := []Assessment{{Risk: RiskSafe}, {Risk: RiskSafe, Reads: "x"}, {Risk: RiskCautious}, {Risk: RiskConfirm}, {Risk: RiskDangerous}}
	for _, as := range risks {
		for _, kind := range []callKind{kindRead, kindWrite, kindExecute} {
			for i, lv := range Levels {
				prev := false
				for m := 8; m >= 0; m-- {
					ask, _ := needsPerson(lv, kind, as, float64(m)/8, false)
					if prev && !ask {
						t.Errorf("%s kind %d %s: momentum %d/8 asks less than a higher one", lv, kind, as.Risk, m)
					}
					prev = ask
					if i > 0 {
						if before, _ := needsPerson(Levels[i-1], kind, as, float64(m)/8, false); ask && !before {
							t.Errorf("%s asks about kind %d %s at %d/8 where %s does not", lv, kind, as.Risk, m, Levels[i-1])
						}
					}
				}
			}
		}
	}
}

func TestMomentumScore(t *testing.T) {
	tests := []struct {
		outcomes string
		want     float64
	}{
		{"", 1},
		{"f", 0.875},
		{"ff", 0.75},
		{"r", 0.75},
		{"sfsfsfsf", 0.5},
		{"ffffffff", 0},
		{"rrrr", 0},
		{"rrrrf", 0},
	}
	for _, tt := range tests {
		if got := (Momentum{Outcomes: tt.outcomes}).Score(); got != tt.want {
			t.Errorf("score of %q = %v, want %v", tt.outcomes, got, tt.want)
		}
	}
	var m Momentum
	for range 20 {
		m.record(outcomeFailure)
	}
	m.record(outcomeSuccess)
	if len(m.Outcomes) != momentumWindow || m.Outcomes[momentumWindow-1] != outcomeSuccess {
		t.Errorf("window %q, want the latest %d outcomes", m.Outcomes, momentumWindow)
	}
}

func TestParseLevel(t *testing.T) {
	for _, s := range []string{"careful", "Balanced", " bold "} {
		if _, err := ParseLevel(s); err != nil {
			t.Errorf("ParseLevel(%q): %v", s, err)
		}
	}
	if _, err := ParseLevel("yolo"); err == nil {
		t.Error("ParseLevel took an unknown level")
	}
	if err := (Config{Autonomy: "yolo"}).Check(); err == nil {
		t.Error("Check took an unknown autonomy level")
	}
	if got := (Config{}).Defaults().Autonomy; got != LevelBalanced {
		t.Errorf("default autonomy %q, want balanced", got)
	}
}

func TestEffectiveLevel(t *testing.T) {
	tests := []struct {
		channel, playbook, want Level
	}{
		{"", "", ""},
		{"", LevelCareful, ""},
		{LevelBold, "", LevelBold},
		{LevelBold, LevelCareful, LevelCareful},
		{LevelCareful, LevelBold, LevelCareful}, // a playbook never makes a run bolder
		{LevelBalanced, "reckless", LevelBalanced},
	}
	for _, tt := range tests {
		st := &State{Autonomy: tt.channel, PlaybookLevel: tt.playbook}
		if got := st.EffectiveLevel(); got != tt.want {
			t.Errorf("channel %q, playbook %q: %q, want %q", tt.channel, tt.playbook, got, tt.want)
		}
	}
}
